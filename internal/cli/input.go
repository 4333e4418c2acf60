package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/oci"
	"github.com/installstrategy/installstrategy/pkg/source"
	"github.com/installstrategy/installstrategy/pkg/store"
	"github.com/installstrategy/installstrategy/pkg/strategy"
	"github.com/installstrategy/installstrategy/pkg/trust"
)

// pick says which strategy ConfigMap a verb wants from an input holding
// several: the ConfigMap called name, chosen with flag ("" when the verb
// has no such flag).
type pick struct {
	name string
	flag string
}

// loadStrategy reads FILE, "-" or cm/NAME and returns the one strategy in
// it. Objects of the input that are not strategies (kubectl get cm -o yaml
// prints kube-root-ca.crt beside them) are named on standard error as
// skipped; an input that holds no strategy is an error naming what it
// holds.
//
// A path of the form cm/NAME (or configmap/NAME) reads the strategy
// ConfigMap NAME from the cluster (namespace -n), through the store, so a
// chunked strategy is reassembled and its chunks and digest checked. An
// oci:// reference pulls a strategy artifact (see pullStrategy).
//
// Every read goes through pkg/source: the verb's clusterTrust (--key,
// --allow-unsigned) when it has one; else (a verb that shows the
// strategy: inspect, decode, ...) source.Unverified or an unverified
// pull, whose size is bounded before anything is decoded, and a note on
// standard error says it is not verified.
func (o *options) loadStrategy(ctx context.Context, path string, p pick) (*codec.Loaded, error) {
	if oci.IsReference(path) {
		if p.name != "" {
			return nil, oneArtifact(path, p.flag)
		}
		if o.clusterTrust != nil {
			return o.clusterTrust.pull(ctx, o, path)
		}
		l, _, err := o.pullStrategy(ctx, path)
		if err == nil {
			o.noteUnverified(path, l)
		}
		return l, err
	}
	if cmName, ok := clusterRef(path); ok {
		if p.name != "" {
			return nil, usageError(fmt.Errorf("%s names one ConfigMap already; %s picks one of a file's", path, p.flag))
		}
		c, err := o.cluster()
		if err != nil {
			return nil, err
		}
		e, err := c.entryByName(ctx, cmName)
		if err != nil {
			return nil, err
		}
		if o.clusterTrust != nil {
			return o.clusterTrust.load(ctx, o, c, e)
		}
		dopts, err := o.decodeOptions()
		if err != nil {
			return nil, err
		}
		l, err := c.loadUnverified(ctx, dopts, e)
		if err == nil {
			o.noteUnverified("configmap "+e.String(), l)
		}
		return l, err
	}
	in, err := o.readInput(path)
	if err != nil {
		return nil, err
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	if in.Strategy != nil {
		if p.name != "" {
			return nil, fmt.Errorf("%s: %s picks a ConfigMap, but the input is a manifests text", in.Source, p.flag)
		}
		return givenByUser(codec.LoadInput(in, dopts, strategy.ParseOptions{}))
	}
	cm, err := pickConfigMap(in, p)
	if err != nil {
		return nil, err
	}
	if cm, err = assembleHead(in, cm); err != nil {
		return nil, err
	}
	o.printSkipped(in)
	l, err := givenByUser(codec.LoadConfigMap(in.Source, cm, dopts, strategy.ParseOptions{}))
	return l, explainChunkedHead(err, cm)
}

// givenByUser marks a strategy of the user's own input (a file, standard
// input: source.File bounded it), which whoever runs the command vouches
// for.
func givenByUser(l *codec.Loaded, err error) (*codec.Loaded, error) {
	if l != nil {
		l.VerifiedBy = source.GivenByUser
	}
	return l, err
}

// mayAct refuses to act on a strategy a display read loaded ("not
// verified", source.Unverified or an unverified pull) unless the user
// took it as it is with --allow-unsigned: what a verb only shows is never
// applied by mistake.
func (o *options) mayAct(l *codec.Loaded) error {
	if !strings.HasPrefix(l.VerifiedBy, source.NotVerified) || (o.clusterTrust != nil && o.clusterTrust.allowUnsigned) {
		return nil
	}
	return fmt.Errorf("%s: refusing to act on it (give --key to verify it, or --allow-unsigned to take it as it is)", l.VerifiedBy)
}

// noteUnverified says on standard error that the strategy at where, which
// a verb shows, is not verified, and by whom it may have been written
// (source.NotVerified: ...); nothing for one pinned.
func (o *options) noteUnverified(where string, l *codec.Loaded) {
	if why, ok := strings.CutPrefix(l.VerifiedBy, source.NotVerified+": "); ok {
		fmt.Fprintf(o.streams.ErrOut, "note: %s is not verified: %s (verify --key checks its signature)\n", where, why)
	}
}

// assembleHead reassembles the head of a chunked strategy from the chunk
// ConfigMaps given with it (kubectl get cm -o yaml of its namespace), as
// the store does when it reads one from the cluster; the chunks used are
// no longer listed as skipped. A head given without its chunks is returned
// as it is (decoding it names the command that reads it).
func assembleHead(in *codec.Input, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	raw, chunked := cm.Annotations[metakeys.ChunksAnnotation]
	if !chunked || len(in.Chunks) == 0 {
		return cm, nil
	}
	whole, err := store.Assemble(cm, in.Chunks)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.Source, err)
	}
	var listed []struct{ Name string }
	_ = json.Unmarshal([]byte(raw), &listed) // Assemble parsed it already
	used := map[string]bool{}
	for _, c := range listed {
		used[c.Name] = true
	}
	kept := in.Skipped[:0]
	for _, s := range in.Skipped {
		if !(s.Chunk && s.Namespace == cm.Namespace && used[s.Name]) {
			kept = append(kept, s)
		}
	}
	in.Skipped = kept
	return whole, nil
}

// explainChunkedHead adds to the error of decoding a chunked strategy's
// head the command that reads the whole strategy from the cluster.
func explainChunkedHead(err error, cm *corev1.ConfigMap) error {
	if !errors.Is(err, codec.ErrChunkedHead) {
		return err
	}
	return fmt.Errorf("%w; read it from the cluster: kubectl installstrategy get cm/%s -n %s", err, cm.Name, orDefault(cm.Namespace))
}

// verifyStored verifies a strategy stored in the cluster (cm/NAME) through
// the store: its chunks and digest are checked on the read, and with a key
// ring its signature.
func (o *options) verifyStored(ctx context.Context, ref string, ring *trust.KeyRing) ([]Check, error) {
	name, _ := clusterRef(ref)
	c, err := o.cluster()
	if err != nil {
		return nil, err
	}
	e, err := c.entryByName(ctx, name)
	if err != nil {
		return nil, err
	}
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	// Read as a display verb reads it (bounded, its chunks and digest
	// checked); the signature is judged below, against --key.
	l, err := c.loadUnverified(ctx, dopts, e)
	if err != nil {
		return []Check{{Name: "read", Status: "fail", Detail: err.Error()}}, nil
	}
	detail := fmt.Sprintf("configmap %s, %s, %s decoded from %s", e, e.Encoding, bytesString(len(l.Text)), bytesString(e.EncodedBytes))
	if len(e.Chunks) > 0 {
		detail += fmt.Sprintf(" in %d chunks, each matching the head's record", len(e.Chunks))
	}
	checks := []Check{{Name: "encoding", Status: "ok", Detail: detail}}
	if e.Digest != "" {
		checks = append(checks, Check{Name: "digest", Status: "ok", Detail: e.Digest + " matches"})
	} else {
		checks = append(checks, Check{Name: "digest", Status: "warn", Detail: "no digest recorded (KubeVirt form): integrity cannot be checked"})
	}
	switch {
	case e.Identity.Version == "":
		checks = append(checks, Check{Name: "identity", Status: "warn", Detail: "no version annotation"})
	case e.Identity.Identifier == "":
		checks = append(checks, Check{Name: "identity", Status: "warn", Detail: "no identifier: matched on version and registry only (legacy)"})
	default:
		checks = append(checks, Check{Name: "identity", Status: "ok", Detail: identityString(e.Identity)})
	}
	if ring != nil {
		checks = append(checks, signatureCheck("", ring, l.Text, codec.Info{Signature: e.Signature, SignatureKey: e.SignatureKey,
			Statement: e.Statement, StatementSignature: e.StatementSignature, Identity: e.Identity})...)
	}
	return append(checks, parseChecks(l.Strategy, l.Warnings)...), nil
}

// readInput reads FILE or "-" and tells strategies from other objects.
func (o *options) readInput(path string) (*codec.Input, error) {
	dopts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	in, err := source.File{Path: path, Stdin: o.streams.In, MaxBytes: int(dopts.MaxDecodedBytes)}.Input()
	return in, explainNotStrategy(err)
}

// explainNotStrategy adds to an input's "not a strategy" error the command
// that reads what the user most likely meant.
func explainNotStrategy(err error) error {
	var ns *codec.NotStrategyError
	if !errors.As(err, &ns) {
		return err
	}
	if first := ns.Objects[0]; first.Chunk {
		return fmt.Errorf("%w; read the strategy it belongs to from the cluster: kubectl installstrategy list -n %s names its head, kubectl installstrategy get cm/HEAD -n %s reads it", err, orDefault(first.Namespace), orDefault(first.Namespace))
	}
	return fmt.Errorf("%w; want a strategy ConfigMap (kubectl get cm -n NAMESPACE -l kubevirt.io/install-strategy -o yaml) or a manifests text", err)
}

func orDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// printSkipped names the objects of an input that are not strategies.
func (o *options) printSkipped(in *codec.Input) {
	for _, s := range in.Skipped {
		fmt.Fprintf(o.streams.ErrOut, "skipped %s (%s document %d): %s\n", s.Object(), in.Source, s.Document, s.Reason)
	}
}

// pickConfigMap returns the strategy ConfigMap p asks for, or the only one.
func pickConfigMap(in *codec.Input, p pick) (*corev1.ConfigMap, error) {
	if p.name == "" {
		if len(in.ConfigMaps) == 1 {
			return in.ConfigMaps[0], nil
		}
		names := make([]string, len(in.ConfigMaps))
		for i, cm := range in.ConfigMaps {
			names[i] = cm.Name
		}
		how := "pick one with " + p.flag + " NAME"
		if p.flag == "" {
			how = "give a file that holds one, or cm/NAME to read one from the cluster"
		}
		return nil, fmt.Errorf("%s: holds %d strategy ConfigMaps (%s); %s", in.Source, len(in.ConfigMaps), strings.Join(names, ", "), how)
	}
	for _, cm := range in.ConfigMaps {
		if cm.Name == p.name {
			return cm, nil
		}
	}
	for _, s := range in.Skipped {
		if s.Name == p.name {
			return nil, fmt.Errorf("%s: %s: %s", in.Source, s.Object(), s.Reason)
		}
	}
	return nil, fmt.Errorf("%s: no strategy ConfigMap named %q", in.Source, p.name)
}

// fileFlag is -f/--filename, kubectl's spelling of a verb's strategy
// argument: the verb takes the argument or -f, not both.
type fileFlag struct{ path string }

func addFileFlag(cmd *cobra.Command) *fileFlag {
	f := &fileFlag{}
	cmd.Flags().StringVarP(&f.path, "filename", "f", "", "the strategy: a file, - for standard input, cm/NAME or oci://HOST/REPOSITORY:TAG (the same as the argument)")
	return f
}

// source returns the one strategy given, as the argument or with -f.
func (f *fileFlag) source(cmd *cobra.Command, args []string) (string, error) {
	switch {
	case len(args) == 1 && f.path != "":
		return "", usageError(fmt.Errorf("%s: give the strategy once, as the argument or with -f", cmd.CommandPath()))
	case len(args) == 1:
		return args[0], nil
	case f.path != "":
		return f.path, nil
	}
	return "", usageError(fmt.Errorf("%s: give the strategy, as the argument or with -f (usage: %s)", cmd.CommandPath(), cmd.UseLine()))
}
