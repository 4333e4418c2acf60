package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/installstrategy/installstrategy/internal/confine"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

func newDecodeCommand(o *options) *cobra.Command {
	var outputDir, name string
	var force bool
	var out *output
	var file *fileFlag
	cmd := &cobra.Command{
		Use:   "decode FILE|-|cm/NAME|oci://REF | -f FILE",
		Short: "Print the manifests text of a strategy ConfigMap, or split it into files",
		Long: `Decode a strategy ConfigMap and print its manifests text exactly as stored
(gzip+base64 or legacy plain; a native ConfigMap's digest is verified first).

With --output-dir, write one file per object instead, named
<kind>_<namespace>_<name>.yaml (the namespace part is empty for cluster-scoped
objects), each in the strategy's canonical form. Nothing is written unless the
whole strategy decodes and parses, and each file is replaced atomically.

The folder ends up holding exactly this strategy's objects, so that a later
encode DIR builds the same strategy: decode records the files it wrote in
DIR/.installstrategy-files and removes those of an earlier decode that this one
does not write. It refuses a folder holding other .yaml, .yml or .json files
(a later encode DIR would include them), unless --force, which removes them.

-o json, yaml, name, jsonpath= or go-template= prints the strategy's objects (a
v1 List, as kubectl does) instead of the text.`,
		Example: `  # Decode a real KubeVirt strategy ConfigMap
  kubectl get cm -n kubevirt -l kubevirt.io/install-strategy -o yaml > strategies.yaml
  kubectl installstrategy decode strategies.yaml --name kubevirt-install-strategy-abcde

  # From a file, one object per file
  kubectl installstrategy decode kubevirt-v1.9.0.configmap.yaml --output-dir ./v1.9.0`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := file.source(cmd, args)
			if err != nil {
				return err
			}
			if force && outputDir == "" {
				return usageError(errors.New("--force applies to --output-dir"))
			}
			if err := out.validate(); err != nil {
				return err
			}
			if !out.Human() && outputDir != "" {
				return usageError(errors.New("-o and --output-dir: give one"))
			}
			l, err := o.loadStrategy(cmd.Context(), src, pick{name: name, flag: "--name"})
			if err != nil {
				return err
			}
			if !out.Human() {
				printWarnings(o.streams.ErrOut, l.Warnings)
				return out.print(o.streams.Out, toList(l.Strategy.Objects))
			}
			return o.writeDecoded(l, outputDir, force)
		},
	}
	cmd.Flags().StringVar(&outputDir, "output-dir", "", "write one file per object into this folder instead of printing the text")
	cmd.Flags().StringVar(&name, "name", "", "the ConfigMap to decode when the input holds several")
	cmd.Flags().BoolVar(&force, "force", false, "with --output-dir, remove .yaml, .yml and .json files of the folder that this decode does not write, whoever wrote them")
	out = addOutput(cmd, "text")
	file = addFileFlag(cmd)
	o.addRegistryFlag(cmd)
	return cmd
}

// writeDecoded prints a strategy's text, or writes one file per object into
// outputDir (all rendered before any is written, each written atomically;
// see writeFolder).
func (o *options) writeDecoded(l *codec.Loaded, outputDir string, force bool) error {
	printWarnings(o.streams.ErrOut, l.Warnings)
	if outputDir == "" {
		_, err := o.streams.Out.Write(l.Text)
		return err
	}
	files, err := objectFiles(l.Strategy)
	if err != nil {
		return err
	}
	removed, err := writeFolder(outputDir, files, force)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("wrote %d files to %s", len(files), outputDir)
	if removed > 0 {
		msg += fmt.Sprintf(", removed %d files of an earlier decode", removed)
	}
	fmt.Fprintln(o.streams.ErrOut, msg)
	return nil
}

// folderIndex is the file, in a decode --output-dir folder, that lists the
// files decode wrote there, one name a line.
const folderIndex = ".installstrategy-files"

// writeFolder makes dir hold exactly files. Manifest files (.yaml, .yml,
// .json) that an earlier decode wrote (folderIndex lists them) and this one
// does not are removed; other manifest files are refused before anything
// is written, or with force removed too. It returns how many were removed.
//
// The index is written first with the old and the new names, so a decode
// interrupted half-way still owns every file it may have left.
func writeFolder(dir string, files []namedFile, force bool) (int, error) {
	want := map[string]bool{}
	for _, f := range files {
		want[f.name] = true
	}
	owned := map[string]bool{}
	var entries []fs.DirEntry
	d, err := confine.Open(dir)
	switch {
	case err == nil:
		defer d.Close()
		if data, err := d.ReadFile(folderIndex); err == nil {
			for _, n := range strings.Split(string(data), "\n") {
				if n != "" && n == filepath.Base(n) {
					owned[n] = true
				}
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("output folder %s: %w", dir, err)
		}
		if entries, err = d.Entries(); err != nil {
			return 0, fmt.Errorf("output folder %s: %w", dir, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("output folder %s: %w", dir, err)
	}
	var stale, foreign []string
	for _, e := range entries {
		if e.IsDir() || !isManifestFile(e.Name()) || want[e.Name()] {
			continue
		}
		stale = append(stale, e.Name())
		if !owned[e.Name()] {
			foreign = append(foreign, e.Name())
		}
	}
	if len(foreign) > 0 && !force {
		shown := foreign
		if len(shown) > 3 {
			shown = append(shown[:3:3], "...")
		}
		return 0, fmt.Errorf("output folder %s holds %d manifest files that decode did not write (%s); a later encode %s would include them: use an empty folder, or --force to remove them",
			dir, len(foreign), strings.Join(shown, ", "), dir)
	}
	if d == nil {
		if d, err = confine.Create(dir); err != nil {
			return 0, fmt.Errorf("create output folder: %w", err)
		}
		defer d.Close()
	}
	index := func(names map[string]bool) error {
		list := make([]string, 0, len(names))
		for n := range names {
			list = append(list, n)
		}
		sort.Strings(list)
		return d.WriteFile(folderIndex, []byte(strings.Join(list, "\n")+"\n"), 0o644)
	}
	union := maps.Clone(want)
	for _, n := range stale {
		union[n] = true
	}
	if err := index(union); err != nil {
		return 0, err
	}
	for _, f := range files {
		if err := d.WriteFile(f.name, f.data, 0o644); err != nil {
			return 0, err
		}
	}
	for _, n := range stale {
		if err := d.Remove(n); err != nil {
			return 0, fmt.Errorf("remove stale file: %w", err)
		}
	}
	return len(stale), index(want)
}

// isManifestFile reports whether encode DIR reads a file of this name.
func isManifestFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

type namedFile struct {
	name string
	data []byte
}

// objectFiles renders every object of a strategy into its own file content,
// before anything is written.
func objectFiles(s *strategy.Strategy) ([]namedFile, error) {
	files := make([]namedFile, 0, len(s.Objects))
	var names confine.Names
	for _, obj := range s.Objects {
		ref := strategy.RefOf(obj)
		name := fileName(ref)
		if err := names.Add(name, ref.String()); err != nil {
			return nil, fmt.Errorf("%w; decode without --output-dir", err)
		}
		data, err := strategy.MarshalObject(obj)
		if err != nil {
			return nil, fmt.Errorf("serialise %s: %w", ref, err)
		}
		files = append(files, namedFile{name: name, data: data})
	}
	return files, nil
}

// fileName is <kind>_<namespace>_<name>.yaml, the kind in lower case, each
// part escaped (confine.Name).
func fileName(ref strategy.ObjectRef) string {
	return confine.Name("_", ".yaml", strings.ToLower(ref.Kind), ref.Namespace, ref.Name)
}
