package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/strategy"
)

// configMapEditor is a ServiceAccount of namespace ns bound, through a Role
// and a RoleBinding, to every verb on ConfigMaps of ns and nothing else,
// and a client that authenticates as it with a TokenRequest token (no
// impersonation: the API server sees the ServiceAccount itself). user is
// its user name.
func configMapEditor(ctx context.Context, t *testing.T, env *testenv.Env, ns, name string) (kube kubernetes.Interface, user string) {
	t.Helper()
	admin := env.Kube
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindRole(ctx, t, env, ns, name, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name})
	kube = serviceAccountClient(ctx, t, env, ns, name)
	awaitConfigMapAccess(ctx, t, kube, ns)
	return kube, "system:serviceaccount:" + ns + ":" + name
}

// awaitConfigMapAccess waits until kube may list the ConfigMaps of ns. The
// API server's authorizer learns of a Role and its binding from its own
// informers, a moment after they are created: until then the account is
// refused ("role ... not found").
func awaitConfigMapAccess(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	testenv.WaitFor(ctx, t, "a new binding in effect", func(ctx context.Context) (bool, string, error) {
		_, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if apierrors.IsForbidden(err) {
			return false, err.Error(), nil
		}
		return err == nil, "", err
	})
}

// bindRole binds the ServiceAccount sa of ns to ref in ns.
func bindRole(ctx context.Context, t *testing.T, env *testenv.Env, ns, sa string, ref rbacv1.RoleRef) {
	t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + strings.ToLower(ref.Kind) + "-" + ref.Name, Namespace: ns}, RoleRef: ref,
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// serviceAccountClient is a client holding only a TokenRequest token of
// the ServiceAccount sa of ns and the cluster's CA.
func serviceAccountClient(ctx context.Context, t *testing.T, env *testenv.Env, ns, sa string) kubernetes.Interface {
	t.Helper()
	tr, err := env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", ns, sa, err)
	}
	cfg := &rest.Config{Host: env.Config.Host, BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData, CAFile: env.Config.CAFile, ServerName: env.Config.ServerName}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mayEverything asks the API server whether user may do everything.
func mayEverything(ctx context.Context, t *testing.T, env *testenv.Env, user string) bool {
	t.Helper()
	sar, err := env.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// gzipBase64 is text as a native strategy ConfigMap holds it.
func gzipBase64(t *testing.T, text []byte) string {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := zw.Write(text); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// historyAttack is a plugin installation "small" that ran v1 (revision 1)
// and v2 (revision 2, current), both anchored by the admin who applied
// them, and an attacker who may do anything with the namespace's
// ConfigMaps and nothing else.
type historyAttack struct {
	env      *testenv.Env
	ctx      context.Context
	ns       string
	owner    inventory.Owner
	attacker kubernetes.Interface
	user     string
	// genuine are the revision and history ConfigMaps as the admin left
	// them, by name, and anchor the Namespace's anchor annotation.
	genuine map[string]*corev1.ConfigMap
	anchor  string
	// crb is the ClusterRoleBinding of cluster-admin to the attacker
	// that the forged revisions add.
	crb string
}

func newHistoryAttack(t *testing.T) *historyAttack {
	env, ctx, ns := smallProduct(t)
	a := &historyAttack{env: env, ctx: ctx, ns: ns, owner: inventory.Owner{Namespace: ns, Name: "small", Kind: inventory.KindPlugin},
		crb: "escalate-" + ns, genuine: map[string]*corev1.ConfigMap{}}
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), a.crb, metav1.DeleteOptions{})
	})
	for _, v := range []string{"v1", "v2"} {
		path := writeFile(t, v+".yaml", smallStrategy(ns, v))
		if code, out, errOut := run(t, nil, append([]string{"apply", path, "--name", "small", "--wait", "--timeout", "2m", "--version", v, "--registry", "example.com"}, clusterArgs(ns)...)...); code != 0 {
			t.Fatalf("apply %s: exit %d\n%s\n%s", v, code, out, errOut)
		}
	}
	a.attacker, a.user = configMapEditor(ctx, t, env, ns, "mallory")
	for _, name := range []string{revisionName(a.owner, 1), revisionName(a.owner, 2), history.ConfigMapName(a.owner)} {
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a.genuine[name] = cm
	}
	a.anchor = a.anchorValue(t)
	if a.anchor == "" {
		t.Fatal("the admin's applies anchored nothing")
	}
	return a
}

func (a *historyAttack) anchorValue(t *testing.T) string {
	t.Helper()
	ns, err := a.env.Kube.CoreV1().Namespaces().Get(a.ctx, a.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Annotations[history.AnchorAnnotation(a.owner)]
}

// restore puts the revision and history ConfigMaps back as the admin left
// them and deletes every other ConfigMap the attacker made.
func (a *historyAttack) restore(t *testing.T) {
	t.Helper()
	api := a.env.Kube.CoreV1().ConfigMaps(a.ns)
	list, err := api.List(a.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if _, ok := a.genuine[cm.Name]; !ok && cm.Name != "kube-root-ca.crt" && !strings.HasPrefix(cm.Name, inventory.NamePrefix) && cm.Name != "dropped" && cm.Name != "added" {
			if err := api.Delete(a.ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, g := range a.genuine {
		cm, err := api.Get(a.ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c := g.DeepCopy()
			c.ResourceVersion, c.UID = "", ""
			_, err = api.Create(a.ctx, c, metav1.CreateOptions{})
		} else if err == nil {
			cm.Annotations, cm.Labels, cm.Data = g.Annotations, g.Labels, g.Data
			_, err = api.Update(a.ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// text returns the text of a genuine revision.
func (a *historyAttack) text(t *testing.T, n int) []byte {
	t.Helper()
	text, _, err := codec.Decode(a.genuine[revisionName(a.owner, n)], codec.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// escalated is the text of genuine revision n with a ClusterRoleBinding of
// cluster-admin to the attacker added.
func (a *historyAttack) escalated(t *testing.T, n int) []byte {
	t.Helper()
	return fmt.Appendf(a.text(t, n), "---\n{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRoleBinding\",\"metadata\":{\"name\":%q},"+
		"\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"cluster-admin\"},"+
		"\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"mallory\",\"namespace\":%q}]}\n", a.crb, a.ns)
}

// identity of genuine revision n.
func (a *historyAttack) identity(n int) strategy.Identity {
	return codec.DescribeConfigMap(a.genuine[revisionName(a.owner, n)]).Identity
}

// revisionCM is a revision ConfigMap the way the plugin writes one, named
// name, holding text under identity id: what a ConfigMap editor can make.
func (a *historyAttack) revisionCM(t *testing.T, name string, text []byte, id strategy.Identity) *corev1.ConfigMap {
	t.Helper()
	cm, err := codec.EncodeText(text, codec.EncodeOptions{Namespace: a.ns, Name: name, Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels = maps.Clone(a.genuine[revisionName(a.owner, 1)].Labels)
	return cm
}

// put creates or replaces a ConfigMap as the attacker.
func (a *historyAttack) put(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	api := a.attacker.CoreV1().ConfigMaps(a.ns)
	old, err := api.Get(a.ctx, cm.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = cm.DeepCopy()
		cm.ResourceVersion, cm.UID = "", ""
		_, err = api.Create(a.ctx, cm, metav1.CreateOptions{})
	case err == nil:
		old.Labels, old.Annotations, old.Data = cm.Labels, cm.Annotations, cm.Data
		_, err = api.Update(a.ctx, old, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("the ConfigMap editor writes configmap %s: %v", cm.Name, err)
	}
}

// editHistory rewrites the history ConfigMap's records as the attacker.
func (a *historyAttack) editHistory(t *testing.T, edit func([]history.Revision) []history.Revision) {
	t.Helper()
	api := a.attacker.CoreV1().ConfigMaps(a.ns)
	cm, err := api.Get(a.ctx, history.ConfigMapName(a.owner), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var revs []history.Revision
	if err := json.Unmarshal([]byte(cm.Data[history.RevisionsKey]), &revs); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(edit(revs))
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[history.RevisionsKey] = string(data)
	if _, err := api.Update(a.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the ConfigMap editor rewrites the history: %v", err)
	}
}

// record returns a pointer to revision n of revs.
func record(t *testing.T, revs []history.Revision, n int) *history.Revision {
	t.Helper()
	for i := range revs {
		if revs[i].Revision == n {
			return &revs[i]
		}
	}
	t.Fatalf("the history has no revision %d", n)
	return nil
}

// historyStatuses runs history -o json and returns each revision's status.
func (a *historyAttack) historyStatuses(t *testing.T) (map[int]string, string) {
	t.Helper()
	code, out, errOut := run(t, nil, append([]string{"history", "small", "-o", "json"}, clusterArgs(a.ns)...)...)
	if code != 0 {
		t.Fatalf("history: exit %d %s", code, errOut)
	}
	var h struct {
		Revisions []revisionRow `json:"revisions"`
	}
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatal(err)
	}
	st := map[int]string{}
	for _, r := range h.Revisions {
		st[r.Revision.Revision] = r.Status
	}
	return st, out
}

// TestConfigMapEditorCannotWriteTheAnchor: the anchor is an annotation of
// the Namespace object, which neither a ConfigMap editor nor anyone bound
// to the default namespace roles (admin, edit) may write.
func TestConfigMapEditorCannotWriteTheAnchor(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(ctx, t)
	owner := inventory.Owner{Namespace: ns, Name: "small", Kind: inventory.KindPlugin}
	forged := fmt.Sprintf(`[{"revision":3,"digest":"sha256:%s","identity":{"version":"v9"}}]`, strings.Repeat("0", 64))
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{history.AnchorAnnotation(owner): forged}}})
	cmEditor, _ := configMapEditor(ctx, t, env, ns, "mallory")
	clients := map[string]kubernetes.Interface{"configmaps only": cmEditor}
	for _, role := range []string{"admin", "edit"} {
		sa := "ns-" + role
		if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bindRole(ctx, t, env, ns, sa, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role})
		c := serviceAccountClient(ctx, t, env, ns, sa)
		awaitConfigMapAccess(ctx, t, c, ns)
		clients["the namespace's "+role+" role"] = c
	}
	for who, c := range clients {
		// The client is who it claims: it may edit ConfigMaps of ns.
		if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: create a ConfigMap: %v", who, err)
		}
		for _, pt := range []types.PatchType{types.MergePatchType, types.StrategicMergePatchType} {
			_, err := c.CoreV1().Namespaces().Patch(ctx, ns, pt, patch, metav1.PatchOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: patch of namespace %s's anchor annotation: %v, want forbidden", who, ns, err)
			}
		}
		live, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil {
			live.Annotations = map[string]string{history.AnchorAnnotation(owner): forged}
			_, err = c.CoreV1().Namespaces().Update(ctx, live, metav1.UpdateOptions{})
		}
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: update of namespace %s: %v, want forbidden", who, ns, err)
		}
	}
	got, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got.Annotations[history.AnchorAnnotation(owner)]; ok {
		t.Fatalf("the anchor was forged: %s", v)
	}
}

// TestRollbackRefusesAConfigMapEditorsRevision is finding 1 of issue 39: a
// user who may only edit ConfigMaps of the namespace rewrites what the
// plugin keeps of a revision so that the admin's next rollback makes them
// cluster-admin. Each route is refused by rollback, which names the
// revision and why and changes nothing, and history marks the revision.
func TestRollbackRefusesAConfigMapEditorsRevision(t *testing.T) {
	a := newHistoryAttack(t)
	rev := func(n int) string { return revisionName(a.owner, n) }
	swapTexts := func(t *testing.T) {
		one, two := a.genuine[rev(1)].DeepCopy(), a.genuine[rev(2)].DeepCopy()
		one.Name, two.Name = two.Name, one.Name
		a.put(t, one)
		a.put(t, two)
	}
	cases := []struct {
		name   string
		attack func(t *testing.T)
		// args are rollback's beyond NAME --yes.
		args []string
		// revision is the one refused, status what history says of it
		// and why a fragment of rollback's reason.
		revision int
		status   string
		why      string
	}{{
		name: "revision text and its digest in the history rewritten",
		attack: func(t *testing.T) {
			cm := a.revisionCM(t, rev(1), a.escalated(t, 1), a.identity(1))
			a.put(t, cm)
			a.editHistory(t, func(revs []history.Revision) []history.Revision {
				record(t, revs, 1).Digest = cm.Annotations[metakeys.DigestAnnotation]
				return revs
			})
		},
		revision: 1, status: revisionTampered, why: "the history record says",
	}, {
		name: "revision text rewritten with its own digest, history left",
		attack: func(t *testing.T) {
			a.put(t, a.revisionCM(t, rev(1), a.escalated(t, 1), a.identity(1)))
		},
		args:     []string{"--to-revision", "1"},
		revision: 1, status: revisionTampered, why: "records digest",
	}, {
		name: "revision text rewritten under the anchored digest",
		attack: func(t *testing.T) {
			cm := a.revisionCM(t, rev(1), a.escalated(t, 1), a.identity(1))
			cm.Annotations = a.genuine[rev(1)].Annotations
			a.put(t, cm)
		},
		revision: 1, status: revisionTampered, why: "digest",
	}, {
		name: "texts of revisions 1 and 2 swapped, history records too",
		attack: func(t *testing.T) {
			swapTexts(t)
			a.editHistory(t, func(revs []history.Revision) []history.Revision {
				r1, r2 := record(t, revs, 1), record(t, revs, 2)
				r1.Identity, r1.Digest, r2.Identity, r2.Digest = r2.Identity, r2.Digest, r1.Identity, r1.Digest
				return revs
			})
		},
		revision: 1, status: revisionTampered, why: "the history record says",
	}, {
		name: "texts of revisions 1 and 2 swapped, history left",
		attack: func(t *testing.T) {
			swapTexts(t)
		},
		revision: 1, status: revisionTampered, why: "records digest",
	}, {
		name: "identity of revision 1 rewritten in its ConfigMap and record",
		attack: func(t *testing.T) {
			cm := a.genuine[rev(1)].DeepCopy()
			cm.Annotations[metakeys.VersionAnnotation] = "v9"
			a.put(t, cm)
			a.editHistory(t, func(revs []history.Revision) []history.Revision {
				record(t, revs, 1).Identity.Version = "v9"
				return revs
			})
		},
		revision: 1, status: revisionTampered, why: "v9",
	}, {
		name: "escalating revision 3 beyond the last",
		attack: func(t *testing.T) {
			cm := a.revisionCM(t, rev(3), a.escalated(t, 2), a.identity(2))
			a.put(t, cm)
			a.editHistory(t, func(revs []history.Revision) []history.Revision {
				r := revs[0]
				r.Revision, r.ConfigMap, r.Digest, r.Source = 3, cm.Name, cm.Annotations[metakeys.DigestAnnotation], "v3.yaml"
				return append([]history.Revision{r}, revs...)
			})
		},
		args:     []string{"--to-revision", "3"},
		revision: 3, status: revisionUnanchored, why: "--allow-unanchored",
	}, {
		name: "current revision's record deleted, revision 1 replayed as revision 3",
		attack: func(t *testing.T) {
			cm := a.genuine[rev(1)].DeepCopy()
			cm.Name = rev(3)
			a.put(t, cm)
			a.editHistory(t, func(revs []history.Revision) []history.Revision {
				r := *record(t, revs, 1)
				r.Revision, r.ConfigMap = 3, cm.Name
				return []history.Revision{r, *record(t, revs, 1)}
			})
		},
		args:     []string{"--to-revision", "3"},
		revision: 3, status: revisionUnanchored, why: "--allow-unanchored",
	}, {
		name: "history ConfigMap deleted, revision 1 rewritten",
		attack: func(t *testing.T) {
			if err := a.attacker.CoreV1().ConfigMaps(a.ns).Delete(a.ctx, history.ConfigMapName(a.owner), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			a.put(t, a.revisionCM(t, rev(1), a.escalated(t, 1), a.identity(1)))
		},
		revision: 1, status: revisionTampered, why: "records digest",
	}, {
		name: "revision 1 made the head of chunks holding another text",
		attack: func(t *testing.T) {
			forged := a.revisionCM(t, "chunk-"+rev(1), a.escalated(t, 1), a.identity(1))
			part := forged.Data[codec.ManifestsKey]
			chunk := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "chunk-" + rev(1), Namespace: a.ns,
				Annotations: map[string]string{"installstrategy.io/chunk-index": "0", "installstrategy.io/chunk-of": a.genuine[rev(1)].Annotations[metakeys.DigestAnnotation]}},
				Data: map[string]string{"part": part}}
			a.put(t, chunk)
			head := a.genuine[rev(1)].DeepCopy()
			head.Data = nil
			list, _ := json.Marshal([]map[string]any{{"name": chunk.Name, "size": len(part), "digest": codec.Digest([]byte(part))}})
			head.Annotations[metakeys.ChunksAnnotation] = string(list)
			a.put(t, head)
		},
		args:     []string{"--to-revision", "1"},
		revision: 1, status: revisionTampered, why: "chunk",
	}, {
		name: "a gzip bomb under the anchored digest",
		attack: func(t *testing.T) {
			cm := a.genuine[rev(1)].DeepCopy()
			cm.Data[codec.ManifestsKey] = gzipBase64(t, bytes.Repeat([]byte("---\nkind: A\n"), 80<<20/12))
			a.put(t, cm)
		},
		revision: 1, status: revisionTampered, why: "",
	}, {
		name: "history record pointing revision 1 at a copy of its genuine text",
		attack: func(t *testing.T) {
			copyOf := a.genuine[rev(1)].DeepCopy()
			copyOf.Name = "copy-of-" + rev(1)
			a.put(t, copyOf)
			a.put(t, a.revisionCM(t, rev(1), a.escalated(t, 1), a.identity(1)))
			a.editHistory(t, func(revs []history.Revision) []history.Revision {
				record(t, revs, 1).ConfigMap = copyOf.Name
				return revs
			})
		},
		revision: 1, status: revisionTampered, why: "records digest",
	}, {
		name: "history record of a kept revision saying it was not kept",
		attack: func(t *testing.T) {
			a.editHistory(t, func(revs []history.Revision) []history.Revision {
				record(t, revs, 1).ConfigMap = ""
				return revs
			})
		},
		revision: 1, status: revisionTampered, why: "the history record names configmap <none>",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer a.restore(t)
			tc.attack(t)
			for _, allow := range []bool{false, true} {
				args := append([]string{"rollback", "small", "--yes", "--wait", "--timeout", "1m"}, tc.args...)
				if allow && tc.status == revisionTampered {
					// --allow-unanchored never takes a tampered revision.
					args = append(args, "--allow-unanchored")
				} else if allow {
					continue
				}
				code, out, errOut := run(t, nil, append(args, clusterArgs(a.ns)...)...)
				want := fmt.Sprintf("revision %d of installation %s/small is %s", tc.revision, a.ns, tc.status)
				if code == 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, tc.why) || strings.Contains(out, "rolling back") {
					t.Errorf("%v: exit %d, want a refusal saying %q and %q\n%s\n%s", args[3:], code, want, tc.why, out, errOut)
				}
			}
			// Nothing changed: no binding, the attacker no admin, v2 runs,
			// the anchor as the admin left it.
			if _, err := a.env.Kube.RbacV1().ClusterRoleBindings().Get(a.ctx, a.crb, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("ClusterRoleBinding %s: %v, want not found", a.crb, err)
			}
			if mayEverything(a.ctx, t, a.env, a.user) {
				t.Errorf("%s is cluster-admin", a.user)
			}
			d, err := a.env.Kube.AppsV1().Deployments(a.ns).Get(a.ctx, "small-controller", metav1.GetOptions{})
			if err != nil || d.Spec.Template.Spec.Containers[0].Image != "example.com/small-controller:v2" {
				t.Errorf("deployment after the refused rollbacks: %v", err)
			}
			if got := a.anchorValue(t); got != a.anchor {
				t.Errorf("anchor changed:\n%s\nwas\n%s", got, a.anchor)
			}
			// history marks the revision, and --revision N exits 1.
			st, out := a.historyStatuses(t)
			if st[tc.revision] != tc.status {
				t.Errorf("history says revision %d is %q, want %s:\n%s", tc.revision, st[tc.revision], tc.status, out)
			}
			code, table, errOut := run(t, nil, append([]string{"history", "small", "--revision", fmt.Sprint(tc.revision)}, clusterArgs(a.ns)...)...)
			if code != 1 || !strings.Contains(table, tc.status) || !strings.Contains(errOut, tc.status) {
				t.Errorf("history --revision %d: exit %d, want 1 naming %s\n%s\n%s", tc.revision, code, tc.status, table, errOut)
			}
		})
	}
	// A history ConfigMap that is no JSON hides nothing and blocks
	// nothing: the anchor lists the revisions, and the genuine revision 1
	// still rolls back (the checks refuse forgeries, not the admin's own
	// history), recorded in a history written afresh.
	garbage := a.genuine[history.ConfigMapName(a.owner)].DeepCopy()
	garbage.Data[history.RevisionsKey] = `[{"revision":1},` + strings.Repeat("[", 1000)
	a.put(t, garbage)
	st, out := a.historyStatuses(t)
	if st[1] != revisionVerified || st[2] != revisionVerified || len(st) != 2 {
		t.Fatalf("history of a corrupt history ConfigMap: %v\n%s", st, out)
	}
	code, out, errOut := run(t, nil, append([]string{"rollback", "small", "--yes", "--wait", "--timeout", "2m"}, clusterArgs(a.ns)...)...)
	if code != 0 || !strings.Contains(out, "rolling back installation "+a.ns+"/small to revision 1") || !strings.Contains(errOut, "its records are ignored") {
		t.Fatalf("rollback of the genuine history: exit %d\n%s\n%s", code, out, errOut)
	}
	if st, out = a.historyStatuses(t); st[3] != revisionVerified || st[1] != revisionVerified || st[2] != revisionVerified {
		t.Fatalf("history after the rollback: %v\n%s", st, out)
	}
}

// TestPlantedNextRevisionIsReplaced: a ConfigMap editor who creates the
// revision ConfigMap the next apply will use (revision 3, holding an
// escalated text under the next revision's name) does not make the history
// name their text: the apply replaces it with what it ran, the history
// records that text's digest, and history shows revision 3 verified.
func TestPlantedNextRevisionIsReplaced(t *testing.T) {
	a := newHistoryAttack(t)
	planted := a.revisionCM(t, revisionName(a.owner, 3), a.escalated(t, 2), a.identity(2))
	a.put(t, planted)
	path := writeFile(t, "v3.yaml", smallStrategy(a.ns, "v3"))
	if code, out, errOut := run(t, nil, append([]string{"apply", path, "--name", "small", "--wait", "--timeout", "2m", "--version", "v3", "--registry", "example.com"}, clusterArgs(a.ns)...)...); code != 0 {
		t.Fatalf("apply v3: exit %d\n%s\n%s", code, out, errOut)
	}
	cm, err := a.env.Kube.CoreV1().ConfigMaps(a.ns).Get(a.ctx, revisionName(a.owner, 3), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Annotations[metakeys.DigestAnnotation] == planted.Annotations[metakeys.DigestAnnotation] {
		t.Fatalf("revision 3's ConfigMap still holds the planted text (digest %s)", cm.Annotations[metakeys.DigestAnnotation])
	}
	text, _, err := codec.Decode(cm, codec.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(text), a.crb) || !strings.Contains(string(text), "v3") {
		t.Errorf("revision 3's text is not what apply ran:\n%s", text)
	}
	var revs []history.Revision
	h, err := a.env.Kube.CoreV1().ConfigMaps(a.ns).Get(a.ctx, history.ConfigMapName(a.owner), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(h.Data[history.RevisionsKey]), &revs); err != nil {
		t.Fatal(err)
	}
	if r := record(t, revs, 3); r.ConfigMap != cm.Name || r.Digest != cm.Annotations[metakeys.DigestAnnotation] {
		t.Errorf("history records revision 3 as %+v, want configmap %s digest %s", *r, cm.Name, cm.Annotations[metakeys.DigestAnnotation])
	}
	if st, _ := a.historyStatuses(t); st[3] != revisionVerified {
		t.Errorf("history says revision 3 is %q, want %q", st[3], revisionVerified)
	}
}
