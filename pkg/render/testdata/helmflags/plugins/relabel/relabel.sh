#!/bin/sh
# A Helm 4 postrenderer/v1 plugin for the tests: it rewrites a marker in
# every object to its first argument (or "post-rendered") and adds one
# object of its own.
to=${1:-post-rendered}
sed "s/POSTRENDER_ME/$to/g"
printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: added-by-post-renderer\ndata:\n  by: relabel\n'
