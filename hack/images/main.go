// Command images builds the project's container images (the operator's,
// and the sample product's components') without Docker
// (`make images`; logic in internal/images) and, with --load-into, imports
// them into the real node of a running local cluster.
//
//	images --image REF [--product-version V] [--version V --commit C --date D] [--out DIR] [--load-into STATE_DIR]
//	images --sample-registry "" --kubevirt-operators DIR [--load-into STATE_DIR]
//
// --kubevirt-operators packs KubeVirt's virt-operator binaries built from
// its release tags (DIR/virt-operator-TAG, from
// ../shared/tools/virtoperator/build.sh) as quay.io/kubevirt/virt-operator:TAG.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/installstrategy/installstrategy/internal/cmdmain"
	"github.com/installstrategy/installstrategy/internal/images"
	"github.com/installstrategy/installstrategy/internal/localcluster"
	"github.com/installstrategy/installstrategy/pkg/generate"
)

func main() { cmdmain.Run("images", run) }

func run(ctx context.Context, args []string) error {
	var o images.Options
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.StringVar(&o.Image, "image", "", "the operator image's reference (tag)")
	fs.StringVar(&o.ProductVersion, "product-version", "", "the operator's main.version (the product version it dumps); empty is a development build")
	fs.StringVar(&o.Version, "version", "", "version stamp of --version")
	fs.StringVar(&o.Commit, "commit", "", "commit stamp")
	fs.StringVar(&o.Date, "date", "", "date stamp")
	fs.StringVar(&o.OutDir, "out", "_output/images", "folder of the tarballs")
	fs.StringVar(&o.SampleRegistry, "sample-registry", "registry.example/sample", "registry of the sample product's component images (tagged for each of generate.SampleVersions); empty builds none")
	kubevirtOperators := fs.String("kubevirt-operators", "", "folder of virt-operator-TAG binaries to pack as KUBEVIRT_REGISTRY/virt-operator:TAG")
	kubevirtRegistry := fs.String("kubevirt-registry", "quay.io/kubevirt", "registry of the virt-operator images")
	loadInto := fs.String("load-into", "", "state folder of a local cluster whose real node imports the images (skipped with a message when it does not run)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.SampleVersions = generate.SampleVersions
	var built []images.Built
	if o.Image != "" || o.SampleRegistry != "" {
		var err error
		if built, err = images.Build(ctx, o); err != nil {
			return err
		}
	}
	if *kubevirtOperators != "" {
		kv, err := images.VirtOperators(o, *kubevirtOperators, *kubevirtRegistry)
		if err != nil {
			return err
		}
		built = append(built, kv...)
	}
	for _, b := range built {
		fmt.Fprintf(os.Stderr, "built %s (%s): %s\n", b.Ref, b.Digest, b.Tarball)
	}
	if *loadInto == "" {
		return nil
	}
	s, err := localcluster.Load(*loadInto)
	if errors.Is(err, localcluster.ErrNotRunning) || (err == nil && s.RealNode == nil) {
		fmt.Fprintf(os.Stderr, "not loaded: no local cluster with a real node runs in %s (make cluster-up)\n", *loadInto)
		return nil
	}
	if err != nil {
		return err
	}
	for _, b := range built {
		if err := localcluster.ImportImages(ctx, s.RealNode.Containerd, b.Tarball); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "loaded %s into the real node %s\n", b.Ref, s.RealNode.Name)
	}
	return nil
}
