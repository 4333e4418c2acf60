package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// reportVersion is the apiVersion of what the plugin prints that is no
// object of the cluster (inspect's report, a plan): print-only kinds, never
// served, so that -o json, yaml, jsonpath and go-template see typed objects
// as they do in kubectl.
const reportVersion = "cli.installstrategy.io/v1"

// output is the -o flag of a verb that prints objects, the same on every
// verb: the verb's own views for people (table and wide, or text) and
// cli-runtime's printers, as kubectl has them, for json, yaml, kyaml, name,
// jsonpath=, jsonpath-as-json=, jsonpath-file=, go-template=,
// go-template-file= (and --template, --allow-missing-template-keys).
type output struct {
	format string
	human  []string
	flags  *genericclioptions.PrintFlags
	cmd    *cobra.Command
}

// addOutput adds -o to cmd; human are the verb's own formats, the first
// one the default.
func addOutput(cmd *cobra.Command, human ...string) *output {
	o := &output{format: human[0], human: human, flags: genericclioptions.NewPrintFlags(""), cmd: cmd}
	o.flags.OutputFormat = &o.format
	o.flags.TemplatePrinterFlags.AddFlags(cmd)
	cmd.Flags().StringVarP(&o.format, "output", "o", human[0], "output format: "+strings.Join(o.allowed(), ", "))
	o.flags.OutputFlagSpecified = func() bool { return cmd.Flags().Changed("output") }
	return o
}

func (o *output) allowed() []string {
	return append(slices.Clone(o.human), "json", "yaml", "kyaml", "name", "jsonpath=...", "jsonpath-as-json=...", "jsonpath-file=...", "go-template=...", "go-template-file=...")
}

// Human says whether the verb prints its own view (--template without -o
// means go-template, as in kubectl).
func (o *output) Human() bool {
	if t := o.flags.TemplatePrinterFlags.TemplateArgument; t != nil && *t != "" && !o.cmd.Flags().Changed("output") {
		return false
	}
	return slices.Contains(o.human, o.format)
}

// Name says whether -o name was asked for.
func (o *output) Name() bool { return o.format == "name" }

// validate refuses a format no printer has (a usage error, exit 2).
func (o *output) validate() error {
	if o.Human() {
		return nil
	}
	if _, err := o.flags.ToPrinter(); err != nil {
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			return usageError(fmt.Errorf("--output %q: want one of %s", o.format, strings.Join(o.allowed(), ", ")))
		}
		return usageError(fmt.Errorf("--output %q: %w", o.format, err))
	}
	return nil
}

// print prints obj with the printer of -o.
func (o *output) print(w io.Writer, obj runtime.Object) error {
	p, err := o.flags.ToPrinter()
	if err != nil {
		return usageError(fmt.Errorf("--output %q: %w", o.format, err))
	}
	return p.PrintObj(obj, w)
}

// toObject turns v (a struct printed as JSON) into an object of kind gvk
// named name in namespace ns: v's fields stay where they are, apiVersion,
// kind and metadata are added.
func toObject(v any, gvk schema.GroupVersionKind, name, ns string) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	if name != "" {
		u.SetName(name)
	}
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u, nil
}

// toList is a v1 List of items, as kubectl prints several objects.
func toList(items []*unstructured.Unstructured) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}}}
	l.Items = make([]unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		l.Items = append(l.Items, *it)
	}
	return l
}

// refList is a List of the bare objects refs name (apiVersion, kind and
// metadata only), for -o name of the objects of a strategy or a plan:
// kind.group/name, as kubectl prints them.
func refList(refs []strategy.ObjectRef) *unstructured.UnstructuredList {
	items := make([]*unstructured.Unstructured, 0, len(refs))
	for _, r := range refs {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		// The name printer reads the group and kind; the version is
		// not part of a reference.
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: r.Group, Version: "v1", Kind: r.Kind})
		u.SetName(r.Name)
		u.SetNamespace(r.Namespace)
		items = append(items, u)
	}
	return toList(items)
}

// reportGVK is a print-only kind of reportVersion.
func reportGVK(kind string) schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(reportVersion, kind)
}
