package dump_test

import (
	"strings"
	"testing"

	"github.com/installstrategy/installstrategy/internal/dump"
	"github.com/installstrategy/installstrategy/internal/testenv"
	"github.com/installstrategy/installstrategy/pkg/codec"
	"github.com/installstrategy/installstrategy/pkg/identity"
	"github.com/installstrategy/installstrategy/pkg/store"
)

// TestRunRefuses covers the configurations Run refuses before it touches
// the cluster.
func TestRunRefuses(t *testing.T) {
	st, err := store.New(nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kubevirtID, _ := identity.KubeVirt.Identifier(&identity.Config{Namespace: "ns", Version: "v1.0.0"})
	tests := []struct {
		name, config, own string
		wantErr           string
	}{
		{"no configuration", "", "", "no configuration"},
		{"not json", "{", "", "TARGET_DEPLOYMENT_CONFIG"},
		{"unknown key", `{"namespace":"ns","verison":"v1.0.0"}`, "", `unknown key "verison"`},
		{"no namespace", `{"version":"v1.0.0"}`, "", "no namespace"},
		{"no version anywhere", `{"namespace":"ns"}`, "", "no version"},
		{"other version than the operator", `{"namespace":"ns","version":"v1.0.0"}`, "v1.1.0", "this operator is version v1.1.0, the configuration asks for v1.0.0"},
		{"recorded id matches nothing", `{"namespace":"ns","version":"v1.0.0","id":"abc"}`, "", "recorded id abc matches no algorithm"},
		{"sample refuses the version", `{"namespace":"ns","version":"v0.1.0"}`, "", "older than the first sample version"},
		{"kubevirt id, sample generated with it", `{"namespace":"ns","version":"v1.0.0","id":"` + kubevirtID + `","componentImages":{"sample-api":"x"}}`, "", "recorded id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dump.Run(t.Context(), dump.Options{ConfigJSON: []byte(tt.config), Store: st, OwnVersion: tt.own})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestRun dumps twice into a namespace, with the identifier recorded under
// either algorithm: the first run publishes, the second finds it.
func TestRun(t *testing.T) {
	env := testenv.New(t)
	for _, alg := range identity.Algorithms {
		t.Run(alg.Name(), func(t *testing.T) {
			ctx := t.Context()
			ns := env.Namespace(ctx, t)
			cfg := &identity.Config{Namespace: ns, Registry: "registry.example/sample", Version: "v1.2.0"}
			id, err := alg.Identifier(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ID = id
			text, _ := cfg.JSON()
			st, err := store.NewForConfig(env.Config, store.Options{Format: codec.FormatKubeVirt})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{true, false} {
				res, err := dump.Run(ctx, dump.Options{ConfigJSON: text, Store: st, OwnVersion: "v1.2.0"})
				if err != nil {
					t.Fatal(err)
				}
				if res.Published != want || res.Identity.Identifier != id || res.Entry.Format != codec.FormatKubeVirt || res.Objects == 0 {
					t.Fatalf("run %d: %+v", i+1, res)
				}
			}
			entries, err := st.List(ctx, ns)
			if err != nil || len(entries) != 1 {
				t.Fatalf("%d strategies, %v; want one", len(entries), err)
			}
		})
	}
}
