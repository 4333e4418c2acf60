package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// ListRow is one stored strategy as list prints it.
type ListRow struct {
	Namespace    string            `json:"namespace"`
	Name         string            `json:"name"`
	Identity     strategy.Identity `json:"identity"`
	Format       codec.Format      `json:"format"`
	Encoding     string            `json:"encoding"`
	Chunks       int               `json:"chunks"`
	EncodedBytes int               `json:"encodedBytes"`
	// LimitUsedPercent is the encoded size against the 1 MiB object limit
	// (for a chunked strategy: of all its chunks together).
	LimitUsedPercent float64 `json:"limitUsedPercent"`
	// Digest is "none", "recorded", "verified", or the verification error
	// (verified only with --verify).
	Digest  string    `json:"digest"`
	Created time.Time `json:"created"`
	// UsedBy names the custom resources whose target or observed identity
	// this strategy serves, e.g. "installation/demo (target)".
	UsedBy []string `json:"usedBy,omitempty"`
}

// users are the custom resources that pick strategies: Installations and
// KubeVirt CRs, with where their identities are in status.
var users = []struct {
	name     string
	gvr      schema.GroupVersionResource
	target   [3]string // identifier, version, registry fields of status
	observed [3]string
}{
	{"installation", schema.GroupVersionResource{Group: "installstrategy.io", Version: "v1alpha1", Resource: "installations"},
		[3]string{"targetIdentifier", "targetVersion", "targetRegistry"}, [3]string{"observedIdentifier", "observedVersion", "observedRegistry"}},
	{"kubevirt", schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"},
		[3]string{"targetDeploymentID", "targetKubeVirtVersion", "targetKubeVirtRegistry"}, [3]string{"observedDeploymentID", "observedKubeVirtVersion", "observedKubeVirtRegistry"}},
}

// markUsers fills UsedBy: for each user's target and observed identity, the
// newest matching strategy of its namespace, as the store's Find picks it.
func (c *cluster) markUsers(ctx context.Context, namespace string, entries []store.Entry, rows []ListRow) error {
	var errs []error
	for _, u := range users {
		list, err := c.dynamic.Resource(u.gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue // the kind is not served here
			}
			errs = append(errs, fmt.Errorf("list %s in %s: %w", u.gvr.Resource, namespaceName(namespace), err))
			continue
		}
		for _, item := range list.Items {
			for _, side := range []struct {
				label  string
				fields [3]string
			}{{"target", u.target}, {"observed", u.observed}} {
				id := strategy.Identity{Identifier: statusString(&item, side.fields[0]), Version: statusString(&item, side.fields[1]), Registry: statusString(&item, side.fields[2])}
				if id == (strategy.Identity{}) {
					continue
				}
				for i, e := range entries { // newest first
					if e.Namespace == item.GetNamespace() && e.Matches(id) {
						rows[i].UsedBy = append(rows[i].UsedBy, fmt.Sprintf("%s/%s (%s)", u.name, item.GetName(), side.label))
						break
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

func statusString(u *unstructured.Unstructured, field string) string {
	s, _, _ := unstructured.NestedString(u.Object, "status", field)
	return s
}

func newListCommand(o *options) *cobra.Command {
	var allNamespaces, verify bool
	var out *output
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the strategy ConfigMaps in a namespace (native and KubeVirt's)",
		Long: `List the install strategies stored in a namespace (-n, or every namespace with
-A): their identity, form, encoding, chunks, encoded size against the 1 MiB object
limit, digest status, age, and which Installation or KubeVirt custom resource
currently uses each (the newest strategy matching its target or observed identity,
as the operator picks it). Chunk ConfigMaps are parts of a strategy, not
strategies, and are not listed.

--verify reads every strategy and checks its digest (and chunks); without it the
DIGEST column only says whether one is recorded.

-o wide adds the full identifier and the encoding. -o json and yaml print a v1
List of the strategy ConfigMaps as list sees them (apiVersion v1, kind
ConfigMap, metadata, and the columns' fields; not their data), which
jsonpath= and go-template= read; -o name prints configmap/NAME, which every
strategy-reading verb takes (list -o name | xargs -n1 kubectl installstrategy
verify -n NS verifies them all).`,
		Example: `  kubectl installstrategy list -n kubevirt
  kubectl installstrategy list -n kubevirt -o name
  kubectl installstrategy list -A --verify -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := o.cluster()
			if err != nil {
				return err
			}
			ns := c.namespace
			if allNamespaces {
				ns = ""
			}
			ctx := cmd.Context()
			entries, listErr := c.store.List(ctx, ns)
			if entries == nil && listErr != nil {
				return listErr
			}
			dopts, err := o.decodeOptions()
			if err != nil {
				return err
			}
			rows := make([]ListRow, len(entries))
			for i, e := range entries {
				rows[i] = listRow(e)
				if verify {
					// The digest and chunks, not a signature: read as
					// a display verb reads it (source.Unverified).
					if _, err := c.loadUnverified(ctx, dopts, e); err != nil {
						rows[i].Digest = "FAILED: " + err.Error()
					} else if e.Digest != "" {
						rows[i].Digest = "verified"
					}
				}
			}
			if err := c.markUsers(ctx, ns, entries, rows); err != nil {
				fmt.Fprintf(o.streams.ErrOut, "warning: %v\n", err)
			}
			if err := printList(o.streams.Out, out, rows, allNamespaces); err != nil {
				return err
			}
			if listErr != nil {
				return listErr
			}
			for _, r := range rows {
				if strings.HasPrefix(r.Digest, "FAILED") {
					return &ExitError{Code: 1, Err: errors.New("some strategies failed verification")}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list strategies in every namespace")
	cmd.Flags().BoolVar(&verify, "verify", false, "read each strategy and verify its digest and chunks")
	out = addOutput(cmd, "table", "wide")
	return cmd
}

func listRow(e store.Entry) ListRow {
	r := ListRow{Namespace: e.Namespace, Name: e.Name, Identity: e.Identity, Format: e.Format, Encoding: e.Encoding,
		Chunks: len(e.Chunks), EncodedBytes: e.EncodedBytes, Created: e.Created, Digest: "none"}
	r.LimitUsedPercent = 100 * float64(e.EncodedBytes) / codec.ObjectSizeLimit
	if e.Digest != "" {
		r.Digest = "recorded"
	}
	return r
}

func printList(w io.Writer, out *output, rows []ListRow, withNamespace bool) error {
	if !out.Human() {
		items := make([]*unstructured.Unstructured, 0, len(rows))
		for _, r := range rows {
			u, err := toObject(r, corev1.SchemeGroupVersion.WithKind("ConfigMap"), r.Name, r.Namespace)
			if err != nil {
				return err
			}
			u.SetCreationTimestamp(metav1.NewTime(r.Created))
			items = append(items, u)
		}
		return out.print(w, toList(items))
	}
	wide := out.format == "wide"
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No strategies found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NAME\tVERSION\tREGISTRY\tIDENTIFIER\tFORMAT\tCHUNKS\tSIZE\tLIMIT\tDIGEST\tAGE\tUSED BY"
	if wide {
		header += "\tENCODING"
	}
	if withNamespace {
		header = "NAMESPACE\t" + header
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		id := r.Identity.Identifier
		if len(id) > 12 && !wide {
			id = id[:12]
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s\t%.1f%%\t%s\t%s\t%s", r.Name, orNone(r.Identity.Version), orNone(r.Identity.Registry),
			orNone(id), r.Format, r.Chunks, sizeShort(r.EncodedBytes), r.LimitUsedPercent, r.Digest,
			duration.HumanDuration(time.Since(r.Created)), strings.Join(r.UsedBy, ","))
		if wide {
			line += "\t" + r.Encoding
		}
		if withNamespace {
			line = r.Namespace + "\t" + line
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func sizeShort(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.2fMi", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKi", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d", n)
}

func newGetCommand(o *options) *cobra.Command {
	var id strategy.Identity
	var outputDir string
	var force bool
	cmd := &cobra.Command{
		Use:   "get [NAME | cm/NAME | --version V [--registry R] | --identifier ID]",
		Short: "Fetch a strategy from the cluster and print its manifests",
		Long: `Fetch a stored strategy from the cluster (namespace -n) and print its manifests
text, or write one file per object with --output-dir, like decode. Name it by its
ConfigMap name, or let the lookup pick it as an operator would: by identifier,
or (legacy) by version and registry; the newest match wins. Chunked strategies are
reassembled, and every read verifies the chunks and the digest when one is
recorded.`,
		Example: `  kubectl installstrategy get -n kubevirt --version v1.9.0 --registry quay.io/kubevirt > v1.9.0.yaml
  kubectl installstrategy get -n kubevirt kubevirt-install-strategy-abcde --output-dir ./v1.9.0`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			byName := len(args) == 1
			byID := id != (strategy.Identity{})
			if byName == byID {
				return usageError(errors.New("give either a NAME or --identifier / --version [--registry]"))
			}
			if force && outputDir == "" {
				return usageError(errors.New("--force applies to --output-dir"))
			}
			c, err := o.cluster()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var e store.Entry
			switch {
			case byName:
				name := args[0]
				if n, ok := clusterRef(name); ok {
					name = n
				}
				e, err = c.entryByName(ctx, name)
			case id.Identifier != "":
				e, err = c.store.Find(ctx, c.namespace, id)
			default:
				e, err = c.newestOfVersion(ctx, id)
			}
			if err != nil {
				return err
			}
			dopts, err := o.decodeOptions()
			if err != nil {
				return err
			}
			l, err := c.loadUnverified(ctx, dopts, e)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.streams.ErrOut, "strategy %s: %s\n", e, identityString(e.Identity))
			o.noteUnverified("configmap "+e.String(), l)
			return o.writeDecoded(l, outputDir, force)
		},
	}
	cmd.Flags().StringVar(&id.Version, "version", "", "find by version (with --registry for legacy strategies)")
	cmd.Flags().StringVar(&id.Registry, "registry", "", "find by registry, with --version")
	cmd.Flags().StringVar(&id.Identifier, "identifier", "", "find by deployment identifier")
	cmd.Flags().StringVar(&outputDir, "output-dir", "", "write one file per object into this folder instead of printing the text")
	cmd.Flags().BoolVar(&force, "force", false, "with --output-dir, remove .yaml, .yml and .json files of the folder that this get does not write (see decode)")
	return cmd
}

// newestOfVersion finds the newest strategy of a version (and registry,
// when given), whatever its identifier: what a person asking for "v1.9.0"
// means. (An operator's lookup matches identifiers first; see store.Find.)
func (c *cluster) newestOfVersion(ctx context.Context, id strategy.Identity) (store.Entry, error) {
	entries, err := c.store.List(ctx, c.namespace)
	for _, e := range entries { // newest first
		if e.Identity.Version == id.Version && (id.Registry == "" || e.Identity.Registry == id.Registry) {
			return e, nil
		}
	}
	if err != nil {
		return store.Entry{}, err
	}
	what := "version " + id.Version
	if id.Registry != "" {
		what += " and registry " + id.Registry
	}
	return store.Entry{}, fmt.Errorf("no strategy of %s in namespace %s: %w", what, c.namespace, store.ErrNotFound)
}

const publishLong = `Publish a strategy into the cluster (namespace -n) through the store: a manifests
text, a folder of manifests (as decode --output-dir writes), a strategy
ConfigMap file, or a strategy artifact (oci://...). The text is parsed and stored
in canonical form; when its encoding exceeds 900 KiB it is split into ordered
chunk ConfigMaps plus a head holding the digest, written so that no reader ever
sees half a strategy. Publishing never replaces anything: the newest strategy for
an identity wins lookups.

The identity comes from --version/--registry/--identifier, or from the
ConfigMap's annotations (an artifact's) when publishing a ConfigMap file (an
artifact). --key signs the strategy while storing it (the signature goes on the
head of a chunked one; see sign).

With a second argument oci://HOST/REPOSITORY:TAG (push is the same verb), the
strategy (any of the above, or cm/NAME from the cluster) is pushed to that
registry instead, as an OCI artifact of type
application/vnd.installstrategy.strategy.v1: an empty config and one layer, the
gzip-compressed canonical text (the same text and identity always give the same
digest), with annotations naming the product (--product, default the
repository's last path element), version, registry, identifier and the text's
digest. --key then signs it right after the push, as sign oci://... does (a
cosign signature under the artifact's sha256-<hex>.sig tag whose payload binds
the digest to that identity). The pushed reference HOST/REPOSITORY@sha256:DIGEST
is printed on standard output (what to pin), a summary on standard error; -o json
or yaml print a PublishedArtifact (` + reportVersion + `). Credentials come from the
docker config and its credential helpers (docker login), as for crane and cosign.`

const publishExample = `  kubectl installstrategy publish ./v1.9.0 -n kubevirt --version v1.9.0 --registry quay.io/kubevirt \
      --identifier 26d9c18701d6b1d6d39b6ef1473a28e3db8f806e
  kubectl installstrategy publish kubevirt-v1.9.0.configmap.yaml -n kubevirt --format kubevirt

  # To a registry, signed; then into an air-gapped cluster from its mirror
  COSIGN_PASSWORD=... kubectl installstrategy push kubevirt-v1.9.0.configmap.yaml oci://ghcr.io/acme/kubevirt:v1.9.0 --key cosign.key
  kubectl installstrategy publish oci://registry.internal:5000/mirror/kubevirt:v1.9.0 -n kubevirt`

// publishCmd holds the flags of publish.
type publishCmd struct {
	o                        *options
	id                       strategy.Identity
	format, keyFile, product string
	file                     *fileFlag
	out                      *output
}

func newPublishCommand(o *options) *cobra.Command {
	c := &publishCmd{o: o}
	cmd := &cobra.Command{
		Use:     "publish FILE|DIR|-|cm/NAME|oci://REF [oci://DESTINATION] | -f FILE [oci://DESTINATION]",
		Aliases: []string{"push"},
		Short:   "Store a strategy in the cluster (in chunks when it is large) or in a registry",
		Long:    publishLong,
		Example: publishExample,
		Args:    cobra.MaximumNArgs(2),
		RunE:    c.run,
	}
	c.add(cmd)
	return cmd
}

// add registers publish's flags on cmd.
func (c *publishCmd) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.keyFile, "key", "", "sign the strategy with this PEM private key (see sign; $"+PasswordEnv+" opens an encrypted cosign key)")
	cmd.Flags().StringVar(&c.id.Version, "version", "", "the strategy's product version")
	cmd.Flags().StringVar(&c.id.Registry, "registry", "", "the image registry the strategy was generated for")
	cmd.Flags().StringVar(&c.id.Identifier, "identifier", "", "the deployment identifier (see the id command)")
	cmd.Flags().StringVar(&c.format, "format", "native", "ConfigMap form: native or kubevirt (chunked strategies are always native)")
	cmd.Flags().StringVar(&c.product, "product", "", "with an oci:// destination: the artifact's product (default: the repository's last path element)")
	c.out = addOutput(cmd, "text")
	c.file = addFileFlag(cmd)
	c.o.addRegistryFlag(cmd)
}

// args splits the arguments into the strategy's source and the oci://
// destination ("" for the cluster), and checks the flags against them.
func (c *publishCmd) args(cmd *cobra.Command, args []string) (src, dest string, err error) {
	if n := len(args); n == 2 || n == 1 && c.file.path != "" {
		if !oci.IsReference(args[n-1]) {
			return "", "", usageError(fmt.Errorf("%s: %s: the strategy is given already; a second argument is where to push it: want oci://HOST/REPOSITORY:TAG", cmd.CommandPath(), args[n-1]))
		}
		dest, args = args[n-1], args[:n-1]
	}
	if dest == "" && cmd.CalledAs() == "push" {
		return "", "", usageError(errors.New("push: give where to push the strategy: push FILE|DIR|-|cm/NAME|oci://REF oci://HOST/REPOSITORY:TAG (publish without one stores it in the cluster)"))
	}
	if src, err = c.file.source(cmd, args); err != nil {
		return "", "", err
	}
	if err := c.out.validate(); err != nil {
		return "", "", err
	}
	switch {
	case dest == "" && c.product != "":
		return "", "", usageError(errors.New("--product names the product of an artifact: it applies with an oci:// destination"))
	case dest == "" && !c.out.Human():
		return "", "", usageError(errors.New("--output: publish into the cluster prints text; -o applies with an oci:// destination"))
	case dest != "" && cmd.Flags().Changed("format"):
		return "", "", usageError(errors.New("--format is the ConfigMap form; an artifact holds the text"))
	case c.out.Name():
		return "", "", usageError(errors.New("--output name: publish prints one artifact; want text, json or yaml"))
	}
	return src, dest, nil
}

func (c *publishCmd) run(cmd *cobra.Command, args []string) error {
	o := c.o
	src, dest, err := c.args(cmd, args)
	if err != nil {
		return err
	}
	f, err := codec.ParseFormat(c.format)
	if err != nil {
		return usageError(err)
	}
	text, fromCM, warnings, err := o.publishInput(cmd.Context(), src, dest != "")
	if err != nil {
		return err
	}
	printWarnings(o.streams.ErrOut, warnings)
	if c.id == (strategy.Identity{}) {
		c.id = fromCM
	}
	if c.id.Version == "" {
		return usageError(errors.New("the strategy needs a version: give --version"))
	}
	var signer *trust.Signer
	if c.keyFile != "" {
		if signer, err = readSigner(c.keyFile); err != nil {
			return err
		}
	}
	if dest != "" {
		info, err := o.pushStrategy(cmd.Context(), dest, text, c.id, c.product, signer)
		if err != nil {
			return err
		}
		return o.printArtifact(c.out, "PublishedArtifact", info, pushSummary(dest, info))
	}
	return c.publishInCluster(cmd.Context(), f, text, signer)
}

// publishInCluster stores text through the store in the namespace and
// says what it wrote.
func (c *publishCmd) publishInCluster(ctx context.Context, f codec.Format, text []byte, signer *trust.Signer) error {
	o := c.o
	cl, err := o.cluster()
	if err != nil {
		return err
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return err
	}
	sopts := store.Options{Format: f, Decode: dopts}
	if signer != nil { // Options.Signer is an interface: no typed nil
		sopts.Signer = signer
	}
	st, err := store.New(cl.kube, sopts)
	if err != nil {
		return err
	}
	e, err := st.PublishText(ctx, cl.namespace, text, c.id)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.streams.Out, "configmap/%s published in %s: %s, %s encoded", e.Name, e.Namespace, identityString(e.Identity), sizeShort(e.EncodedBytes))
	if len(e.Chunks) > 0 {
		names := make([]string, len(e.Chunks))
		for i, ch := range e.Chunks {
			names[i] = ch.Name
		}
		fmt.Fprintf(o.streams.Out, " in %d chunks (%s)", len(e.Chunks), strings.Join(names, ", "))
	}
	if e.SignatureKey != "" {
		fmt.Fprintf(o.streams.Out, ", signed with key %s", e.SignatureKey)
	}
	fmt.Fprintln(o.streams.Out)
	return nil
}

// publishInput returns the canonical text to publish and, for a ConfigMap
// input, the identity its annotations claim.
// A stored strategy (cm/NAME) is published only to a registry (toRegistry).
func (o *options) publishInput(ctx context.Context, path string, toRegistry bool) ([]byte, strategy.Identity, []strategy.Warning, error) {
	if path != "-" {
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			text, warnings, err := o.readFolder(path)
			return text, strategy.Identity{}, warnings, err
		}
	}
	if _, ok := clusterRef(path); ok && !toRegistry {
		return nil, strategy.Identity{}, nil, usageError(fmt.Errorf("%s is stored already; publish takes a FILE, DIR, - or oci://REF (or pushes cm/NAME to an oci:// destination)", path))
	}
	l, err := o.loadStrategy(ctx, path, pick{flag: ""})
	if err != nil {
		return nil, strategy.Identity{}, nil, err
	}
	text, err := l.Strategy.Serialize()
	return text, l.Strategy.Identity, l.Warnings, err
}

// namespaceName names a namespace in a message; "" is every namespace (-A).
func namespaceName(ns string) string {
	if ns == "" {
		return "every namespace"
	}
	return "namespace " + ns
}
