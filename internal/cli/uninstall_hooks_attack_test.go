package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/installstrategy/installstrategy/pkg/history"
	"github.com/installstrategy/installstrategy/pkg/inventory"
	"github.com/installstrategy/installstrategy/pkg/metakeys"
	"github.com/installstrategy/installstrategy/pkg/plan"
)

// TestUninstallRunsNoHooksFromATamperedRevision: uninstall runs the
// pre-delete and post-delete hooks of the installation's current revision
// only when the namespace's anchor verifies it. A user who may only edit
// the namespace's ConfigMaps rewrites the current revision to add delete
// hooks that bind cluster-admin to them, for the admin's uninstall to
// create (with the history record's digest rewritten to match, or with
// its own digest and the history left): uninstall runs no hook, says why
// on stderr, still removes the installation, and neither binding is ever
// created.
func TestUninstallRunsNoHooksFromATamperedRevision(t *testing.T) {
	cases := []struct {
		name   string
		attack func(t *testing.T, a *historyAttack, cm *corev1.ConfigMap)
		// why is a fragment of the reason stderr gives.
		why string
	}{{
		name: "revision text and its digest in the history rewritten",
		attack: func(t *testing.T, a *historyAttack, cm *corev1.ConfigMap) {
			a.put(t, cm)
			a.editHistory(t, func(revs []history.Revision) []history.Revision {
				record(t, revs, 2).Digest = cm.Annotations[metakeys.DigestAnnotation]
				return revs
			})
		},
		why: "the history record says",
	}, {
		name: "revision text rewritten with its own digest, history left",
		attack: func(t *testing.T, a *historyAttack, cm *corev1.ConfigMap) {
			a.put(t, cm)
		},
		why: "records digest",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			uninstallTamperedHooks(t, tc.attack, tc.why)
		})
	}
}

// uninstallTamperedHooks runs attack on a fresh historyAttack with the
// current revision's ConfigMap rewritten to hold delete hooks, then
// uninstall, and checks that no hook ran.
func uninstallTamperedHooks(t *testing.T, attack func(*testing.T, *historyAttack, *corev1.ConfigMap), why string) {
	a := newHistoryAttack(t)
	post := a.crb + "-post"
	t.Cleanup(func() {
		_ = a.env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), post, metav1.DeleteOptions{})
	})
	hook := func(name, phase string) string {
		return fmt.Sprintf("---\n{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRoleBinding\",\"metadata\":{\"name\":%q,\"annotations\":{%q:%q}},"+
			"\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"cluster-admin\"},"+
			"\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"mallory\",\"namespace\":%q}]}\n", name, metakeys.HelmHookAnnotation, phase, a.ns)
	}
	text := append(a.text(t, 2), hook(a.crb, string(plan.PreDelete))+hook(post, string(plan.PostDelete))...)
	attack(t, a, a.revisionCM(t, revisionName(a.owner, 2), text, a.identity(2)))

	code, out, errOut := run(t, nil, append([]string{"uninstall", "small", "--wait", "--timeout", "2m"}, clusterArgs(a.ns)...)...)
	t.Logf("uninstall: exit %d\n%s\n%s", code, out, errOut)
	if code != 0 {
		t.Fatalf("uninstall: exit %d", code)
	}
	if want := "installation " + a.owner.String() + ": no delete hooks run: revision 2 is " + revisionTampered; !strings.Contains(errOut, want) || !strings.Contains(errOut, why) {
		t.Errorf("stderr does not say %q (%s):\n%s", want, why, errOut)
	}
	if strings.Contains(out, "hook pre-delete") || strings.Contains(out, "hook post-delete") {
		t.Errorf("uninstall ran hooks:\n%s", out)
	}
	for _, name := range []string{a.crb, post} {
		if _, err := a.env.Kube.RbacV1().ClusterRoleBindings().Get(a.ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the tampered revision's hook ClusterRoleBinding %s: %v, want never created", name, err)
		}
	}
	if mayEverything(a.ctx, t, a.env, a.user) {
		t.Error("the ConfigMap editor may do everything after the uninstall")
	}
	inv, err := inventory.NewStore(a.env.Kube).Get(a.ctx, a.owner)
	if err != nil || inv.Exists() {
		t.Errorf("inventory after uninstall: exists %v, %v", inv.Exists(), err)
	}
}
