package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/internal/buildinfo"
)

func newVersionCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Long: `Print the plugin's version, the commit it was built from and the commit's date
(stamped by make release), and the Go version and platform. -o json or yaml for
scripts.`,
		Example: `  kubectl installstrategy version
  kubectl installstrategy version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info := buildinfo.Get()
			switch output {
			case "", "text":
				_, err := fmt.Fprintf(o.streams.Out, "kubectl-installstrategy %s\n", info)
				return err
			case "json":
				b, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(o.streams.Out, "%s\n", b)
				return err
			case "yaml":
				b, err := yaml.Marshal(info)
				if err != nil {
					return err
				}
				_, err = o.streams.Out.Write(b)
				return err
			}
			return usageError(fmt.Errorf("--output %q: want text, json or yaml", output))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or yaml")
	return cmd
}
