package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// encodeLong is the encode command's help text.
const encodeLong = `Encode a manifests text (a file, standard input, or a folder of .yaml, .yml and
.json files as written by decode --output-dir) into a strategy ConfigMap, printed
on standard output.

The manifests are parsed first, so nothing invalid is ever encoded, and are
written in canonical form: KubeVirt's kind order and field layout, repairs
applied. --keep-text stores the input text byte for byte instead (a single file
only).

--format kubevirt writes the ConfigMap exactly as KubeVirt's operator does
(generateName kubevirt-install-strategy-, its labels and annotations, the same
gzip bytes). --format native (the default) adds installstrategy.io annotations
with a sha256 digest of the text that every read verifies.

--from-helm CHART renders a Helm chart with Helm's own Go SDK (v4): the objects
helm template --include-crds prints for the same inputs, named as Helm names
them: --values, --set, --set-string, --set-file, --set-json and --set-literal
(merged by Helm's own code, in its order: files, --set-json, --set,
--set-string, --set-file, --set-literal), --release-name (default: the
chart's name), -n, --kube-version, --api-versions, --skip-crds,
--skip-schema-validation, --post-renderer NAME (a Helm 4 postrenderer/v1
plugin, with --post-renderer-args) and --dependency-update (a chart folder
lacking its dependencies gets them first). CHART is found as helm install
finds it: a chart folder, a packaged .tgz, REPO/CHART (a repository of your
Helm repositories config, its index as helm repo update cached it), an
http(s):// URL of a .tgz, a chart name with --repo URL, or an oci://
reference; downloads are bounded to 64 MiB. Helm's -f is --values here: -f
stays kubectl's --filename, the manifests file.

--version: with --from-helm it is the chart's version (a version or a semver
range, as helm's --version: the one picked from a repository or the oci://
tag; a chart folder, archive or URL of another version is refused), and the
strategy's version is --strategy-version, by default the chart's version.
Without a chart (manifests, --from-kustomize) --version is the strategy's
version, as before, and --strategy-version says the same.

Nothing is sent to a cluster, unless --installation NAME names the plugin
installation of -n the chart is for: then it renders as helm install (no
revision yet) or helm upgrade would (.Release.IsUpgrade, .Release.Revision:
its newest revision plus one), and Helm's lookup sees that installation's
live objects in -n (read with your kubeconfig; nothing else: another
namespace, a cluster-scoped object or an object it does not own is not
found), so a password a chart generates unless lookup finds it survives the
upgrade, as with helm upgrade. Hooks: install, upgrade, rollback and delete
hooks stay in the strategy with their helm.sh/hook annotations, and apply,
rollback and uninstall (and the operator) run them as Helm does: in their
phase, by hook weight, waiting for Jobs to complete, with their delete
policies (see docs/PRODUCTS.md, "Helm hooks"); test hooks are dropped. Each
hook and what became of it is printed on standard error. The chart's name, version
and appVersion are recorded in the ConfigMap's annotations
(installstrategy.io/helm-chart, -chart-version, -app-version). The chart's
rendered NOTES.txt travels in the strategy's text as a Notes document
(signed with it, never applied); apply prints it after a successful run,
and the operator records it as a Notes Event on the Installation.

--from-kustomize DIR builds a kustomization with kustomize's krusty, as
kubectl kustomize DIR does (same options, same order).`

// encodeExample is the encode command's examples.
const encodeExample = `  # Re-encode a decoded KubeVirt strategy as KubeVirt would store it
  kubectl installstrategy encode manifests.yaml --format kubevirt -n kubevirt \
      --version v1.9.0 --registry quay.io/kubevirt --identifier 26d9c18701d6b1d6d39b6ef1473a28e3db8f806e

  # A folder of objects into a native ConfigMap, then create it
  kubectl installstrategy encode ./v1.9.0 --version v1.9.0 -n kubevirt | kubectl create -f -

  # A Helm chart with values, for the namespace it is installed in; the strategy's version is the chart's
  kubectl installstrategy encode --from-helm ./charts/metallb -n metallb-system \
      --values prod.yaml --set speaker.logLevel=debug --set-string speaker.tag=0.15 > metallb.yaml

  # A chart of a Helm repository (helm repo add metallb https://metallb.github.io/metallb; helm repo update):
  # --version is the chart's, --strategy-version the strategy's
  kubectl installstrategy encode --from-helm metallb/metallb --version 0.15.3 --strategy-version v0.15.3-prod -n metallb-system

  # The same chart with --repo, as helm install --repo does
  kubectl installstrategy encode --from-helm metallb --repo https://metallb.github.io/metallb --version 0.15.x -n metallb-system

  # A packaged chart (or oci://REGISTRY/REPO/CHART:VERSION), rendered for a given cluster version
  kubectl installstrategy encode --from-helm ingress-nginx-4.15.1.tgz -n ingress-nginx --kube-version v1.36.0 \
      --api-versions monitoring.coreos.com/v1

  # A kustomize overlay, as kubectl kustomize renders it
  kubectl installstrategy encode --from-kustomize ./overlays/prod --version v2.1.0 -n shop`

// encodeFlags are the encode command's flags.
type encodeFlags struct {
	id       strategy.Identity
	version  string
	format   string
	name     string
	output   string
	keepText bool
	from     renderFlags
	file     *fileFlag
}

func newEncodeCommand(o *options) *cobra.Command {
	fl := &encodeFlags{}
	cmd := &cobra.Command{
		Use:     "encode FILE|DIR|- | -f FILE | --from-helm CHART | --from-kustomize DIR",
		Short:   "Wrap manifests in a strategy ConfigMap",
		Long:    encodeLong,
		Example: encodeExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fl.run(cmd, args, o)
		},
	}
	fl.add(cmd)
	return cmd
}

// add declares fl's flags on cmd.
func (fl *encodeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&fl.version, "version", "", "with --from-helm: the chart's version (a version or a semver range, as helm's --version; an oci:// chart without a tag needs a version, its tag); otherwise the strategy's product version, as --strategy-version")
	cmd.Flags().StringVar(&fl.id.Version, "strategy-version", "", "the strategy's product version (required without --from-helm, where --version says the same; with --from-helm the chart's version by default)")
	cmd.Flags().StringVar(&fl.id.Registry, "registry", "", "the image registry the strategy was generated for")
	cmd.Flags().StringVar(&fl.id.Identifier, "identifier", "", "the deployment identifier (see the id command)")
	cmd.Flags().StringVar(&fl.format, "format", "native", "ConfigMap form: native or kubevirt")
	cmd.Flags().StringVar(&fl.name, "name", "", "ConfigMap name (default: a generateName prefix)")
	cmd.Flags().StringVarP(&fl.output, "output", "o", "yaml", "output format: yaml or json")
	cmd.Flags().BoolVar(&fl.keepText, "keep-text", false, "store the input text as it is instead of its canonical form")
	fl.file = addFileFlag(cmd)
	fl.from.add(cmd)
}

// run encodes the manifests fl and args name and prints the ConfigMap.
func (fl *encodeFlags) run(cmd *cobra.Command, args []string, o *options) error {
	if err := fl.from.check(cmd, args, fl.file.path); err != nil {
		return err
	}
	f, err := codec.ParseFormat(fl.format)
	if err != nil {
		return usageError(err)
	}
	if fl.output != "yaml" && fl.output != "json" {
		return usageError(fmt.Errorf("--output %q: want yaml or json", fl.output))
	}
	if err := fl.from.versions(fl.version, &fl.id); err != nil {
		return err
	}
	text, warnings, annotations, err := fl.input(cmd, args, o)
	if err != nil {
		return err
	}
	printWarnings(o.streams.ErrOut, warnings)
	if fl.id.Identifier == "" {
		fmt.Fprintln(o.streams.ErrOut, "warning: no --identifier: loaders will match this strategy on version and registry only")
	}
	cm, err := codec.EncodeText(text, codec.EncodeOptions{Format: f, Namespace: o.namespace(), Name: fl.name, Identity: fl.id})
	if err != nil {
		return err
	}
	for k, v := range annotations {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[k] = v
	}
	out, err := marshalConfigMap(cm, fl.output)
	if err != nil {
		return err
	}
	if len(cm.Data[codec.ManifestsKey]) > codec.ObjectSizeLimit {
		fmt.Fprintf(o.streams.ErrOut, "warning: encoded manifests are %d bytes, over the 1 MiB object limit; publish through the store, which splits them into chunks\n", len(cm.Data[codec.ManifestsKey]))
	}
	_, err = o.streams.Out.Write(out)
	return err
}

// input reads and parses the manifests: a rendered chart or kustomization,
// or the file, folder or standard input args and -f name; annotations
// are those the renderer records on the ConfigMap.
func (fl *encodeFlags) input(cmd *cobra.Command, args []string, o *options) (text []byte, warnings []strategy.Warning, annotations map[string]string, err error) {
	if fl.from.given() {
		var rendered []byte
		rendered, annotations, err = fl.from.render(cmd.Context(), o, &fl.id)
		if err != nil {
			return nil, nil, nil, err
		}
		text, warnings, err = parseManifests(fl.from.source(), rendered, fl.keepText)
		return text, warnings, annotations, err
	}
	src, err := fl.file.source(cmd, args)
	if err != nil {
		return nil, nil, nil, err
	}
	text, warnings, err = o.readManifests(src, fl.keepText)
	return text, warnings, nil, err
}

// marshalConfigMap prints a strategy ConfigMap as output (yaml or json)
// asks.
func marshalConfigMap(cm *corev1.ConfigMap, output string) ([]byte, error) {
	if output == "json" {
		out, err := json.MarshalIndent(cm, "", "  ")
		return append(out, '\n'), err
	}
	return codec.MarshalYAML(cm)
}

// readManifests returns the text to encode from a file, stdin or folder.
func (o *options) readManifests(path string, keepText bool) ([]byte, []strategy.Warning, error) {
	if path != "-" {
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			if keepText {
				return nil, nil, usageError(fmt.Errorf("--keep-text needs a single file, %s is a folder", path))
			}
			return o.readFolder(path)
		}
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, nil, err
	}
	data, err := source.File{Path: path, Stdin: o.streams.In, MaxBytes: int(dopts.MaxDecodedBytes)}.Bytes()
	if err != nil {
		return nil, nil, err
	}
	where := path
	if path == "-" {
		where = "standard input"
	}
	if err := notAStrategy(where, data, path); err != nil {
		return nil, nil, err
	}
	return parseManifests(where, data, keepText)
}

// parseManifests parses a manifests text and returns its canonical form,
// or the text itself with keepText.
func parseManifests(source string, data []byte, keepText bool) ([]byte, []strategy.Warning, error) {
	s, warnings, err := strategy.Parse(data, strategy.ParseOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", source, err)
	}
	if keepText {
		return data, warnings, nil
	}
	text, err := s.Serialize()
	return text, warnings, err
}

// notAStrategy refuses to encode a strategy ConfigMap: its manifests
// would be wrapped a second time.
func notAStrategy(source string, data []byte, path string) error {
	docs, err := strategy.ReadDocuments(data, strategy.ParseOptions{})
	if err != nil {
		return nil // strategy.Parse reports it, with the place
	}
	for _, d := range docs {
		if codec.IsStrategyConfigMap(d.Object) {
			name := d.Object.GetName()
			if name == "" {
				name = d.Object.GetGenerateName() + "<generated>"
			}
			if ns := d.Object.GetNamespace(); ns != "" {
				name = ns + "/" + name
			}
			return fmt.Errorf("%s: document %d (line %d): configmap %s is already a strategy; decode it first (kubectl installstrategy decode %s --output-dir DIR, then encode DIR)",
				source, d.Index, d.Line, name, path)
		}
	}
	return nil
}

// readFolder parses every manifest file of a folder, in name order, into one
// strategy and serialises it. The files together are bounded as one file
// is (--max-decoded-size), each read through source.File within what is
// left of the bound.
func (o *options) readFolder(dir string) ([]byte, []strategy.Warning, error) {
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, nil, err
	}
	left := int(dopts.MaxDecodedBytes)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read folder: %w", err)
	}
	var names []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("%s: no .yaml, .yml or .json files", dir)
	}
	sort.Strings(names)
	var all bytes.Buffer
	for _, n := range names {
		if left <= 0 {
			return nil, nil, fmt.Errorf("%s: %w: the folder's files hold more than %d bytes, the bound (--max-decoded-size)", dir, trust.ErrTooLarge, dopts.MaxDecodedBytes)
		}
		data, err := source.File{Path: filepath.Join(dir, n), MaxBytes: left}.Bytes()
		if err != nil {
			return nil, nil, err
		}
		left -= len(data)
		// Each file is checked alone so errors name the file.
		if err := notAStrategy(filepath.Join(dir, n), data, filepath.Join(dir, n)); err != nil {
			return nil, nil, err
		}
		if _, _, err := strategy.Parse(data, strategy.ParseOptions{}); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, n), err)
		}
		all.WriteString("---\n")
		all.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			all.WriteByte('\n')
		}
	}
	s, warnings, err := strategy.Parse(all.Bytes(), strategy.ParseOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	text, err := s.Serialize()
	return text, warnings, err
}
