package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/installstrategy/installstrategy/pkg/apply"
	"github.com/installstrategy/installstrategy/pkg/kinds"
	"github.com/installstrategy/installstrategy/pkg/plan"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// Summary is what a reader of a change between two strategies needs first:
// the workloads that will restart and why, image changes, CRD schema
// changes and RBAC widening, then every changed object with identical
// changes grouped ("65 VirtualMachineClusterInstancetype: label ...").
type Summary struct {
	Restarts []Restart     `json:"restarts,omitempty"`
	Images   []ImageChange `json:"images,omitempty"`
	Schemas  []Review      `json:"schemas,omitempty"`
	RBAC     []Review      `json:"rbac,omitempty"`
	Groups   []ChangeGroup `json:"groups,omitempty"`
}

// Restart is a workload whose pod template changes, so its pods are
// replaced (New: the workload is added).
type Restart struct {
	Ref strategy.ObjectRef `json:"ref"`
	New bool               `json:"new,omitempty"`
	// Reasons are the changed fields of the pod template, relative to it
	// (images are in Images).
	Reasons []string `json:"reasons,omitempty"`
}

// ImageChange is a container whose image changes ("" From: added with a
// new workload or container; "" To: removed).
type ImageChange struct {
	Ref       strategy.ObjectRef `json:"ref"`
	Container string             `json:"container"`
	From      string             `json:"from,omitempty"`
	To        string             `json:"to,omitempty"`
}

// Review is an object of a reviewed kind (kinds.Review) and what its
// change means: the permissions or subjects it adds, the schema versions
// that change.
type Review struct {
	Ref   strategy.ObjectRef `json:"ref"`
	New   bool               `json:"new,omitempty"`
	Notes []string           `json:"notes"`
}

// ChangeGroup is changed objects of one kind with the same changes.
type ChangeGroup struct {
	Kind    string               `json:"kind"`
	Refs    []strategy.ObjectRef `json:"refs"`
	Changes []string             `json:"changes"`
}

// maxListed bounds the field changes listed for one object.
const maxListed = 4

// summarise builds the Summary of a change between the strategies a and b.
// Unless showSecrets, a changed Secret's values are masked as in the diff.
func summarise(a, b *strategy.Strategy, c *Change, showSecrets bool) *Summary {
	ia, ib := a.Index(), b.Index()
	s := &Summary{}
	for _, ref := range c.Added {
		s.added(ref, ib[ref])
	}
	groups := map[string]*ChangeGroup{}
	var order []string
	for _, ref := range c.Changed {
		oa, ob := ia[ref], ib[ref]
		if plan.IsSecret(ref) && !showSecrets {
			oa, ob = maskSecretPair(oa, ob)
		}
		changes, fields := s.changed(ref, oa, ob)
		key := ref.GroupKind().String() + "\x00" + fields
		g, ok := groups[key]
		if !ok {
			g = &ChangeGroup{Kind: ref.Kind, Changes: changes}
			groups[key] = g
			order = append(order, key)
		}
		g.Refs = append(g.Refs, ref)
	}
	s.group(groups, order)
	return s
}

func (s *Summary) group(groups map[string]*ChangeGroup, order []string) {
	for _, k := range order {
		s.Groups = append(s.Groups, *groups[k])
	}
	// Large groups first: they are what a reader can dismiss at once.
	sort.SliceStable(s.Groups, func(i, j int) bool { return len(s.Groups[i].Refs) > len(s.Groups[j].Refs) })
}

// summarisePlan builds the Summary of what a plan would write: the objects
// it creates, and those it updates or recreates compared with their live
// state through the plan's field changes (Secret values are masked by
// the plan already).
func summarisePlan(p *plan.Plan) *Summary {
	s := &Summary{}
	groups := map[string]*ChangeGroup{}
	var order []string
	for _, st := range p.Steps {
		for _, it := range st.Items {
			switch {
			case it.Action == apply.ActionCreate && it.Object != nil:
				s.added(it.Ref, it.Object)
			case (it.Action == apply.ActionUpdate || it.Action == apply.ActionRecreate) && it.Live != nil && it.Object != nil:
				fields := make([]fieldChange, 0, len(it.Changes))
				for _, c := range it.Changes {
					if !plan.IsBookkeeping(c.Path) {
						fields = append(fields, fieldChange{Path: namedVersions(c.Path, it.Object), Old: c.Live, New: c.Desired})
					}
				}
				if len(fields) == 0 {
					continue // the identity annotations only: the table says so
				}
				changes, key := s.changedFields(it.Ref, it.Live, it.Object, fields)
				key = it.Ref.GroupKind().String() + "\x00" + key
				g, ok := groups[key]
				if !ok {
					g = &ChangeGroup{Kind: it.Ref.Kind, Changes: changes}
					groups[key] = g
					order = append(order, key)
				}
				g.Refs = append(g.Refs, it.Ref)
			}
		}
	}
	s.group(groups, order)
	return s
}

// namedVersions names the CRD version of a plan's path by its name, as a
// diff does: .spec.versions[0].schema → .spec.versions[v1].schema.
func namedVersions(path string, obj *unstructured.Unstructured) string {
	rest, ok := strings.CutPrefix(path, ".spec.versions[")
	if !ok {
		return path
	}
	idx, tail, _ := strings.Cut(rest, "]")
	var i int
	if _, err := fmt.Sscanf(idx, "%d", &i); err != nil {
		return path
	}
	if names := crdVersions(obj); i < len(names) {
		return ".spec.versions[" + names[i] + "]" + tail
	}
	return path
}

// empty says whether the summary has nothing to say.
func (s *Summary) empty() bool {
	return len(s.Restarts)+len(s.Images)+len(s.Schemas)+len(s.RBAC)+len(s.Groups) == 0
}

// added records what a new object brings: a workload's pods and images,
// a CRD, the permissions of a role or binding.
func (s *Summary) added(ref strategy.ObjectRef, obj *unstructured.Unstructured) {
	info, _ := kinds.Lookup(ref.GroupKind())
	if info.PodTemplate != nil {
		s.Restarts = append(s.Restarts, Restart{Ref: ref, New: true})
		for _, c := range containerImages(obj, info.PodTemplate) {
			s.Images = append(s.Images, ImageChange{Ref: ref, Container: c[0], To: c[1]})
		}
	}
	switch info.Review {
	case kinds.ReviewRules:
		s.RBAC = append(s.RBAC, Review{Ref: ref, New: true, Notes: grantNotes("+", permissions(obj), nil)})
	case kinds.ReviewBinding:
		s.RBAC = append(s.RBAC, Review{Ref: ref, New: true, Notes: []string{bindingText(obj)}})
	case kinds.ReviewSchema:
		s.Schemas = append(s.Schemas, Review{Ref: ref, New: true, Notes: []string{"versions " + strings.Join(crdVersions(obj), ", ")}})
	}
}

// changed records the highlights of a changed object and returns the
// description of its changes, for people, and the key that grouping
// compares (every field change, exactly).
func (s *Summary) changed(ref strategy.ObjectRef, a, b *unstructured.Unstructured) ([]string, string) {
	return s.changedFields(ref, a, b, fieldChanges(a.Object, b.Object))
}

// changedFields is changed with the field changes given (a plan's, which
// ignore what the server fills in).
func (s *Summary) changedFields(ref strategy.ObjectRef, a, b *unstructured.Unstructured, fields []fieldChange) ([]string, string) {
	info, _ := kinds.Lookup(ref.GroupKind())
	var key strings.Builder
	for _, f := range fields {
		fmt.Fprintf(&key, "%s=%v>%v\x00", f.Path, f.Old, f.New)
	}
	var notes []string
	// covered is the path whose changes the notes describe.
	covered := ""
	if info.PodTemplate != nil {
		covered = pathString(info.PodTemplate)
		ia, ib := containerImages(a, info.PodTemplate), containerImages(b, info.PodTemplate)
		images := imageChanges(ref, ia, ib)
		s.Images = append(s.Images, images...)
		var reasons []string
		if len(images) > 0 {
			reasons = append(reasons, "image")
		}
		for _, f := range fields {
			if rel, ok := strings.CutPrefix(f.Path, covered); ok && !strings.HasSuffix(rel, "].image") {
				reasons = appendUnique(reasons, templateReason(rel))
			}
		}
		if len(reasons) > 0 {
			s.Restarts = append(s.Restarts, Restart{Ref: ref, Reasons: reasons})
			notes = append(notes, "pod template: "+strings.Join(reasons, ", "))
		}
	}
	switch info.Review {
	case kinds.ReviewRules:
		covered = ".rules"
		pa, pb := permissions(a), permissions(b)
		if added := grantNotes("+", pb, pa); len(added) > 0 {
			s.RBAC = append(s.RBAC, Review{Ref: ref, Notes: added})
		}
		notes = append(append(notes, grantNotes("+", pb, pa)...), grantNotes("-", pa, pb)...)
	case kinds.ReviewBinding:
		ta, tb := bindingText(a), bindingText(b)
		if ta != tb {
			s.RBAC = append(s.RBAC, Review{Ref: ref, Notes: []string{"now " + tb + " (was " + ta + ")"}})
		}
	case kinds.ReviewSchema:
		covered = ".spec.versions"
		if sn := schemaNotes(fields, crdVersions(a), crdVersions(b)); len(sn) > 0 {
			s.Schemas = append(s.Schemas, Review{Ref: ref, Notes: sn})
			notes = append(notes, sn...)
		}
	}
	var rest []fieldChange
	for _, f := range fields {
		if covered == "" || !strings.HasPrefix(f.Path, covered) {
			rest = append(rest, f)
		}
	}
	return append(describe(rest), notes...), key.String()
}

// templateReason names a changed field of a pod template shortly:
// "containers[virt-handler].args", "env[NAME] of containers[x]",
// "securityContext", "label app".
func templateReason(rel string) string {
	rel = strings.TrimPrefix(rel, ".spec")
	for _, p := range []struct{ prefix, word string }{{".metadata.labels", "label "}, {".metadata.annotations", "annotation "}} {
		if k, ok := strings.CutPrefix(rel, p.prefix); ok && k != "" {
			return p.word + strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(k, "."), "["), "]")
		}
	}
	segs := splitPath(rel)
	n := 1
	if len(segs) > 1 && (strings.HasPrefix(segs[0], "containers[") || strings.HasPrefix(segs[0], "initContainers[")) {
		n = 2
	}
	if len(segs) > n {
		segs = segs[:n]
	}
	return strings.Join(segs, ".")
}

// splitPath splits ".a.b[x].c[0]" into "a", "b[x]", "c" (numeric indexes
// dropped).
func splitPath(p string) []string {
	var out []string
	for _, seg := range strings.Split(strings.TrimPrefix(p, "."), ".") {
		for strings.HasSuffix(seg, "]") {
			i := strings.LastIndex(seg, "[")
			if i < 0 || !isDigits(seg[i+1:len(seg)-1]) {
				break
			}
			seg = seg[:i]
		}
		if seg != "" {
			out = append(out, seg)
		}
	}
	return out
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// describe says what changed in words: labels and annotations by key with
// both values, other fields by path with both values; with many, the
// fields' paths only.
func describe(fields []fieldChange) []string {
	if len(fields) > maxListed {
		paths := []string{}
		for _, f := range fields {
			paths = appendUnique(paths, shortPath(f.Path))
		}
		more := ""
		if len(paths) > maxListed {
			more = fmt.Sprintf(", … (%d more)", len(paths)-maxListed)
			paths = paths[:maxListed]
		}
		return []string{fmt.Sprintf("%d fields: %s%s", len(fields), strings.Join(paths, ", "), more)}
	}
	var out []string
	for _, f := range fields {
		what := f.Path
		for _, p := range []struct{ prefix, word string }{{".metadata.labels", "label "}, {".metadata.annotations", "annotation "}} {
			if k, ok := strings.CutPrefix(f.Path, p.prefix); ok {
				what = p.word + strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(k, "."), "["), "]")
			}
		}
		old, now := valuePair(f.Old, f.New)
		out = append(out, fmt.Sprintf("%s %s → %s", what, old, now))
	}
	return out
}

// refText names an object for people: Kind namespace/name.
func refText(r strategy.ObjectRef) string {
	if r.Namespace != "" {
		return r.Kind + " " + r.Namespace + "/" + r.Name
	}
	return r.Kind + " " + r.Name
}

// printSummary prints the highlights, then the grouped changes.
func printSummary(w io.Writer, s *Summary, pal palette) {
	section := func(title string, n int) {
		fmt.Fprintf(w, "\n%s (%d):\n", pal.bold(title), n)
	}
	if len(s.Restarts) > 0 {
		section("Workloads that restart", len(s.Restarts))
		for _, r := range s.Restarts {
			why := strings.Join(r.Reasons, ", ")
			if r.New {
				why = "new"
			}
			fmt.Fprintf(w, "  %s: %s\n", refText(r.Ref), why)
		}
	}
	if len(s.Images) > 0 {
		section("Images", len(s.Images))
		for _, im := range s.Images {
			switch {
			case im.From == "":
				fmt.Fprintf(w, "  %s %s [%s]: %s\n", pal.add("+"), refText(im.Ref), im.Container, im.To)
			case im.To == "":
				fmt.Fprintf(w, "  %s %s [%s]: %s\n", pal.remove("-"), refText(im.Ref), im.Container, im.From)
			default:
				fmt.Fprintf(w, "  %s %s [%s]: %s → %s\n", pal.change("~"), refText(im.Ref), im.Container, im.From, imageTail(im.From, im.To))
			}
		}
	}
	reviews := func(title string, l []Review) {
		if len(l) == 0 {
			return
		}
		section(title, len(l))
		for _, r := range l {
			mark := pal.change("~")
			if r.New {
				mark = pal.add("+")
			}
			fmt.Fprintf(w, "  %s %s: %s\n", mark, refText(r.Ref), strings.Join(r.Notes, "; "))
		}
	}
	reviews("CRD schema changes", s.Schemas)
	reviews("RBAC widening", s.RBAC)
	if len(s.Groups) > 0 {
		n := 0
		for _, g := range s.Groups {
			n += len(g.Refs)
		}
		section("Changed objects, identical changes grouped", n)
		for _, g := range s.Groups {
			what := refText(g.Refs[0])
			if len(g.Refs) > 1 {
				what = fmt.Sprintf("%d %s", len(g.Refs), g.Kind)
			}
			fmt.Fprintf(w, "  %s %s: %s\n", pal.change("~"), what, strings.Join(g.Changes, "; "))
		}
	}
}

// imageTail prints the new image shortly when only its tag or digest
// changes ("quay.io/kubevirt/virt-api:v1.8.4 → v1.9.0").
func imageTail(from, to string) string {
	repo := func(s string) string {
		if i := strings.LastIndexAny(s, ":@"); i > strings.LastIndex(s, "/") {
			return s[:i]
		}
		return s
	}
	if rf := repo(from); rf == repo(to) && rf != to {
		return to[len(rf)+1:]
	}
	return to
}
