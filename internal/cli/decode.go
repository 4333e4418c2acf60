package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/internal/atomicfile"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func newDecodeCommand(o *options) *cobra.Command {
	var outputDir, name string
	cmd := &cobra.Command{
		Use:   "decode FILE|-",
		Short: "Print the manifests text of a strategy ConfigMap, or split it into files",
		Long: `Decode a strategy ConfigMap and print its manifests text exactly as stored
(gzip+base64 or legacy plain; a native ConfigMap's digest is verified first).

With --output-dir, write one file per object instead, named
<kind>_<namespace>_<name>.yaml (the namespace part is empty for cluster-scoped
objects), each in the strategy's canonical form. Nothing is written unless the
whole strategy decodes and parses, and each file is replaced atomically.`,
		Example: `  # Decode a real KubeVirt strategy ConfigMap
  kubectl get cm -n kubevirt -l kubevirt.io/install-strategy -o yaml > strategies.yaml
  kubectl installstrategy decode strategies.yaml --name kubevirt-install-strategy-abcde

  # From a file, one object per file
  kubectl installstrategy decode kubevirt-v1.9.0.configmap.yaml --output-dir ./v1.9.0`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := o.loadStrategy(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			return o.writeDecoded(l, outputDir)
		},
	}
	cmd.Flags().StringVar(&outputDir, "output-dir", "", "write one file per object into this folder instead of printing the text")
	cmd.Flags().StringVar(&name, "name", "", "the ConfigMap to decode when the input holds several")
	return cmd
}

// writeDecoded prints a strategy's text, or writes one file per object into
// outputDir (all rendered before any is written, each written atomically).
func (o *options) writeDecoded(l *codec.Loaded, outputDir string) error {
	printWarnings(o.streams.ErrOut, l.Warnings)
	if outputDir == "" {
		_, err := o.streams.Out.Write(l.Text)
		return err
	}
	files, err := objectFiles(l.Strategy)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outputDir, 0o755); err != nil {
		return fmt.Errorf("create output folder: %w", err)
	}
	for _, f := range files {
		if err := atomicfile.WriteFile(filepath.Join(outputDir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.streams.ErrOut, "wrote %d files to %s\n", len(files), outputDir)
	return nil
}

type namedFile struct {
	name string
	data []byte
}

// objectFiles renders every object of a strategy into its own file content,
// before anything is written.
func objectFiles(s *strategy.Strategy) ([]namedFile, error) {
	files := make([]namedFile, 0, len(s.Objects))
	seen := map[string]bool{}
	for _, obj := range s.Objects {
		ref := strategy.RefOf(obj)
		name := fileName(ref)
		if seen[name] {
			return nil, fmt.Errorf("two objects map to the file name %s (%s); decode without --output-dir", name, ref)
		}
		seen[name] = true
		data, err := strategy.MarshalObject(obj)
		if err != nil {
			return nil, fmt.Errorf("serialise %s: %w", ref, err)
		}
		files = append(files, namedFile{name: name, data: data})
	}
	return files, nil
}

// fileName is <kind>_<namespace>_<name>.yaml with path separators replaced.
func fileName(ref strategy.ObjectRef) string {
	clean := strings.NewReplacer("/", "-", "\\", "-", "\x00", "")
	return strings.ToLower(ref.Kind) + "_" + clean.Replace(ref.Namespace) + "_" + clean.Replace(ref.Name) + ".yaml"
}
