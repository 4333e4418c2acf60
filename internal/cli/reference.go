package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// WriteReference writes the Markdown command reference (docs/CLI.md) from
// the commands' own help, so the two cannot drift apart.
func WriteReference(w io.Writer) error {
	root := NewRootCommand(Streams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
	var b bytes.Buffer
	b.WriteString("# kubectl installstrategy: command reference\n\n")
	b.WriteString("Generated from the commands' help by `go test ./internal/cli -run TestReference -update`; do not edit by hand.\n\n")
	b.WriteString(root.Long + "\n\n")
	b.WriteString("Exit status: 0 on success, 2 on a usage error (an unknown command or flag, a bad flag value, a wrong number of arguments), 1 on any other error; " +
		"`diff` and `plan` follow diff(1) (0 same, 1 different, 2 any error) and `verify` exits 1 when a check fails.\n\n")
	b.WriteString("## Commands\n\n")
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		fmt.Fprintf(&b, "- [`%s`](#%s): %s\n", c.Name(), c.Name(), c.Short)
	}
	b.WriteString(completionHelp)
	b.WriteString("\n## Flags of every command\n\n```\n")
	b.WriteString(root.PersistentFlags().FlagUsages())
	b.WriteString("```\n")
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		writeCommand(&b, c)
	}
	out := b.Bytes()
	// Defaults under the home folder (--cache-dir) must not depend on who
	// generated the file.
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		out = bytes.ReplaceAll(out, []byte(home+"/"), []byte("$HOME/"))
	}
	_, err := w.Write(out)
	return err
}

// completionHelp documents cobra's completion command, which the command
// tree gains only when it runs.
const completionHelp = `
## Shell completion

` + "`kubectl-installstrategy completion bash|zsh|fish|powershell`" + ` prints a completion
script (cobra's); commands and flags complete. Load it in the current shell, or
install it for good:

` + "```sh" + `
source <(kubectl-installstrategy completion bash)                      # bash, this shell
kubectl-installstrategy completion bash > /etc/bash_completion.d/kubectl-installstrategy
kubectl-installstrategy completion zsh > "${fpath[1]}/_kubectl-installstrategy"
kubectl-installstrategy completion fish > ~/.config/fish/completions/kubectl-installstrategy.fish
` + "```" + `

Completion of ` + "`kubectl installstrategy ...`" + ` (the plugin called through kubectl) needs
kubectl 1.26 or newer and an executable named kubectl_complete-installstrategy on
PATH that runs ` + "`kubectl-installstrategy __complete \"$@\"`" + `.
`

func writeCommand(b *bytes.Buffer, c *cobra.Command) {
	fmt.Fprintf(b, "\n## %s\n\n%s\n\n```\n%s\n```\n", c.Name(), c.Short, c.UseLine())
	if c.Long != "" {
		b.WriteString("\n" + c.Long + "\n")
	}
	if c.Example != "" {
		b.WriteString("\nExamples:\n\n```sh\n" + c.Example + "\n```\n")
	}
	if flags := c.LocalNonPersistentFlags().FlagUsages(); flags != "" {
		b.WriteString("\nFlags:\n\n```\n" + flags + "```\n")
	}
}
