package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Report is what inspect prints: -o yaml and -o json print it as it is.
type Report struct {
	Source string `json:"source"`
	// Trust says who vouched for the strategy (pkg/source's VerifiedBy):
	// "given by the user" for a file, "pinned digest", or "not verified:
	// WHO may have written it" for a ConfigMap of the cluster or an
	// artifact pulled by tag, which inspect shows without checking.
	Trust     string               `json:"trust,omitempty"`
	ConfigMap *codec.Info          `json:"configMap,omitempty"`
	Artifact  *ArtifactInfo        `json:"artifact,omitempty"`
	Identity  strategy.Identity    `json:"identity"`
	Sizes     Sizes                `json:"sizes"`
	Warnings  []strategy.Warning   `json:"warnings,omitempty"`
	Kinds     []strategy.KindCount `json:"kinds"`
	Objects   []ObjectRow          `json:"objects"`
}

// Sizes are a strategy's sizes in bytes.
type Sizes struct {
	// Encoded is the size of data.manifests, 0 for a plain text input.
	Encoded int `json:"encoded"`
	Decoded int `json:"decoded"`
	// Ratio is decoded ÷ encoded.
	Ratio float64 `json:"ratio"`
	// Headroom is what is left of the 1 MiB object limit.
	Headroom int `json:"headroom"`
	// LimitUsedPercent is encoded ÷ 1 MiB × 100.
	LimitUsedPercent float64 `json:"limitUsedPercent"`
}

// ObjectRow is one object of the strategy.
type ObjectRow struct {
	strategy.ObjectRef `json:",inline"`
	APIVersion         string   `json:"apiVersion"`
	Images             []string `json:"images,omitempty"`
}

func newInspectCommand(o *options) *cobra.Command {
	var name string
	var out *output
	var file *fileFlag
	cmd := &cobra.Command{
		Use:   "inspect FILE|-|cm/NAME|oci://REF | -f FILE",
		Short: "Show a strategy's identity, sizes, kinds and objects",
		Long: `Inspect a strategy ConfigMap (or a manifests text): its identity (version,
registry, identifier), encoding, digest and signature key (verify --key checks
the signature), its sizes (encoded, decoded, ratio,
and the headroom left before the 1 MiB object limit), the count of objects of
each kind, and every object with the images its workloads run. Repairs made
while parsing are listed as warnings.

Trust says who vouched for it. A strategy read from the cluster (cm/NAME) or
pulled by tag (oci://REF:TAG) is shown without a signature check: Trust and a
note on standard error say it is not verified and who may have written it
(verify --key checks the signature). It is bounded in size before it is
decoded (--max-decoded-size), and its text must match the digest its
ConfigMap or artifact records.

-o json, yaml, jsonpath= and go-template= print the report as an object of the
print-only kind StrategyReport (` + reportVersion + `); -o name prints
the strategy's objects, one kind.group/name a line, as kubectl get -f does.`,
		Example: `  kubectl installstrategy inspect kubevirt-v1.9.0.configmap.yaml
  kubectl get cm -n kubevirt kubevirt-install-strategy-abcde -o yaml | kubectl installstrategy inspect - -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := file.source(cmd, args)
			if err != nil {
				return err
			}
			if err := out.validate(); err != nil {
				return err
			}
			var r *Report
			if oci.IsReference(src) {
				if r, err = o.artifactReport(cmd.Context(), src, name); err != nil {
					return err
				}
			} else {
				l, err := o.loadStrategy(cmd.Context(), src, pick{name: name, flag: "--name"})
				if err != nil {
					return err
				}
				r = buildReport(src, l)
			}
			return printReport(o.streams.Out, out, r)
		},
	}
	out = addOutput(cmd, "table")
	file = addFileFlag(cmd)
	cmd.Flags().StringVar(&name, "name", "", "the ConfigMap to inspect when the input holds several")
	o.addRegistryFlag(cmd)
	return cmd
}

// artifactReport is the report of a strategy artifact, with what its
// manifest says (reference, digest, product, signatures).
func (o *options) artifactReport(ctx context.Context, ref, name string) (*Report, error) {
	if name != "" {
		return nil, oneArtifact(ref, "--name")
	}
	l, a, err := o.pullStrategy(ctx, ref)
	if err != nil {
		return nil, err
	}
	r := buildReport(ref, l)
	if r.Artifact, err = o.artifactInfo(ctx, ref, a); err != nil {
		return nil, err
	}
	return r, nil
}

func buildReport(source string, l *codec.Loaded) *Report {
	r := &Report{Source: source, Trust: l.VerifiedBy, ConfigMap: l.Info, Identity: l.Strategy.Identity, Warnings: l.Warnings, Kinds: l.Strategy.CountByKind()}
	r.Sizes.Decoded = len(l.Text)
	if l.Info != nil {
		r.Sizes.Encoded = l.Info.EncodedBytes
		r.Sizes.Ratio = l.Info.Ratio()
		r.Sizes.Headroom = l.Info.Headroom()
		r.Sizes.LimitUsedPercent = 100 * float64(l.Info.EncodedBytes) / codec.ObjectSizeLimit
	}
	for _, obj := range l.Strategy.Objects {
		r.Objects = append(r.Objects, ObjectRow{ObjectRef: strategy.RefOf(obj), APIVersion: obj.GetAPIVersion(), Images: strategy.Images(obj)})
	}
	return r
}

func printReport(w io.Writer, out *output, r *Report) error {
	if out.Human() {
		return printReportTable(w, r)
	}
	if out.Name() {
		refs := make([]strategy.ObjectRef, len(r.Objects))
		for i, obj := range r.Objects {
			refs[i] = obj.ObjectRef
		}
		return out.print(w, refList(refs))
	}
	name, ns := "", ""
	if ci := r.ConfigMap; ci != nil {
		name, ns = ci.Name, ci.Namespace
	}
	obj, err := toObject(r, reportGVK("StrategyReport"), name, ns)
	if err != nil {
		return err
	}
	return out.print(w, obj)
}

func printReportTable(w io.Writer, r *Report) error {
	if err := printReportHeader(w, r); err != nil {
		return err
	}
	return printReportKinds(w, r)
}

// printReportHeader prints the fields of a report: where the strategy
// is, its identity, digest and sizes, and its warnings.
func printReportHeader(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	field := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	field("Source", r.Source)
	if r.Trust != "" {
		field("Trust", r.Trust)
	}
	if ci := r.ConfigMap; ci != nil {
		name := ci.Name
		if name == "" {
			name = ci.GenerateName + "<generated>"
		}
		if ci.Namespace != "" {
			name = ci.Namespace + "/" + name
		}
		field("ConfigMap", name)
		field("Format", string(ci.Format))
		field("Encoding", ci.Encoding)
	} else if a := r.Artifact; a != nil {
		field("Artifact", a.Reference)
		if a.Tag != "" {
			field("Tag", a.Tag)
		}
		field("Format", "OCI artifact ("+oci.ArtifactType+")")
		field("Product", a.Product)
	} else {
		field("Format", "manifests text")
	}
	field("Version", orNone(r.Identity.Version))
	field("Registry", orNone(r.Identity.Registry))
	field("Identifier", orNone(r.Identity.Identifier))
	if ci := r.ConfigMap; ci != nil {
		switch {
		case ci.DigestVerified:
			field("Digest", ci.Digest+" (matches the text)")
		default:
			field("Digest", "none recorded")
		}
		if ci.Signature != "" {
			field("Signature", "by key "+orNone(ci.SignatureKey)+" (not checked: verify --key)")
		}
		field("Encoded size", bytesString(r.Sizes.Encoded))
	}
	if a := r.Artifact; a != nil {
		field("Digest", a.TextDigest+" (verified)")
		field("Signatures", fmt.Sprintf("%d (not checked: verify --key)", a.Signatures))
		field("Compressed size", bytesString(int(a.LayerBytes)))
	}
	field("Decoded size", bytesString(r.Sizes.Decoded))
	if r.ConfigMap != nil {
		field("Ratio", fmt.Sprintf("%.1fx", r.Sizes.Ratio))
		field("Object limit", fmt.Sprintf("%.1f%% of 1 MiB used, %s headroom", r.Sizes.LimitUsedPercent, bytesString(r.Sizes.Headroom)))
	}
	field("Objects", fmt.Sprintf("%d", len(r.Objects)))
	field("Warnings", fmt.Sprintf("%d", len(r.Warnings)))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(w, "  %s\n", x)
	}
	return nil
}

// printReportKinds prints a report's table of kinds and of objects.
func printReportKinds(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "KIND\tGROUP\tCOUNT")
	for _, k := range r.Kinds {
		group := k.Group
		if group == "" {
			group = "core"
		}
		unknown := ""
		if !k.Known {
			unknown = "\t(not in the kind table)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d%s\n", k.Kind, group, k.Count, unknown)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tIMAGES")
	for _, obj := range r.Objects {
		ns := obj.Namespace
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", obj.Kind, ns, obj.Name, strings.Join(obj.Images, ","))
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// bytesString prints a size in bytes with thousands separators and a binary
// unit for readability.
func bytesString(n int) string {
	s := fmt.Sprintf("%d", n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String() + " B"
	if neg {
		out = "-" + out
	}
	abs := n
	if abs < 0 {
		abs = -abs
	}
	switch {
	case abs >= 1<<20:
		out += fmt.Sprintf(" (%.2f MiB)", float64(n)/(1<<20))
	case abs >= 1<<10:
		out += fmt.Sprintf(" (%.1f KiB)", float64(n)/(1<<10))
	}
	return out
}
