package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"sigs.k8s.io/yaml"

	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/source"
)

func newIDCommand(o *options) *cobra.Command {
	var configPath, algorithm string
	var check bool
	cmd := &cobra.Command{
		Use:   "id --config FILE|-",
		Short: "Print the deployment identifier of a deployment config",
		Long: `Compute the identifier an operator gives a deployment config: the value of the
install-strategy-identifier annotation of the strategy ConfigMap it will look
for. The config is the JSON a dump Job receives in TARGET_DEPLOYMENT_CONFIG
(KubeVirt's field names are accepted as they are), or the same in YAML. A config
without a namespace is refused: every deployment config names its install
namespace, so an empty one ({}) is a mistake, not a config.

--algorithm kubevirt reproduces KubeVirt's identifier (hex SHA-1 over the
config's fields in declaration order) for every release line from v1.5: the
config's version picks the field list (v1.5 and v1.6 hash image shasums too,
v1.8 and later the virt-template images); native (the default) is installstrategy's
documented sha256 over the config's canonical JSON. With --check, the config's
own "id" field is verified against the algorithms and the one that reproduces it
is named; a mismatch exits 1.`,
		Example: `  # Which strategy ConfigMap will KubeVirt's operator pick for this config?
  kubectl installstrategy id --config kubevirt-v1.9.0.config.json --algorithm kubevirt

  # Verify the recorded id of a config
  kubectl installstrategy id --config kubevirt-v1.9.0.config.json --check`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configPath == "" {
				return usageError(errors.New("--config is required (a file, or - for standard input)"))
			}
			if _, err := identity.AlgorithmByName(algorithm); err != nil {
				return usageError(fmt.Errorf("--algorithm: %w", err))
			}
			data, err := readConfig(configPath, o.streams.In)
			if err != nil {
				return err
			}
			if check {
				cfg, err := identity.ParseConfig(data)
				if err != nil {
					return fmt.Errorf("%s: %w", configPath, err)
				}
				alg, err := cfg.Verify()
				if err != nil {
					return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", configPath, err)}
				}
				_, err = fmt.Fprintf(o.streams.Out, "%s: id %s matches the %s algorithm\n", configPath, cfg.ID, alg.Name())
				return err
			}
			id, err := identity.IdentifierOf(data, algorithm)
			if err != nil {
				return fmt.Errorf("%s: %w", configPath, err)
			}
			_, err = fmt.Fprintln(o.streams.Out, id)
			return err
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "deployment config file (JSON or YAML), or - for standard input")
	cmd.Flags().StringVar(&algorithm, "algorithm", "native", "identifier algorithm: native or kubevirt")
	cmd.Flags().BoolVar(&check, "check", false, "verify the config's recorded id instead of printing one")
	return cmd
}

// readConfig reads a deployment config, JSON or YAML, as JSON, and refuses
// one that names no install namespace.
func readConfig(path string, stdin io.Reader) ([]byte, error) {
	where := path
	if path == "-" {
		where = "standard input"
	}
	data, err := source.File{Path: path, Stdin: stdin}.Bytes() // bounded
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%s: empty: want a deployment config (JSON or YAML)", where)
	}
	if trimmed[0] != '{' {
		if data, err = yaml.YAMLToJSON(data); err != nil {
			return nil, fmt.Errorf("%s: not a JSON or YAML deployment config: %w", where, err)
		}
	}
	cfg, err := identity.ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if cfg.Namespace == "" {
		return nil, fmt.Errorf("%s: not a deployment config: it names no namespace (want the JSON or YAML of %s, such as {\"namespace\": \"kubevirt\", \"kubeVirtVersion\": \"v1.9.0\", ...})", where, identity.EnvVar)
	}
	return data, nil
}
