package localcluster

import (
	"slices"
	"testing"
)

func TestComponentEnvSetsGOGCUnlessSet(t *testing.T) {
	env := []string{"PATH=/bin", "HOME=/root"}
	got := componentEnv(env)
	if !slices.Equal(got, []string{"PATH=/bin", "HOME=/root", "GOGC=" + ComponentGOGC}) {
		t.Errorf("componentEnv(%q) = %q", env, got)
	}
	if len(env) != 2 {
		t.Errorf("componentEnv changed its argument: %q", env)
	}
	set := []string{"GOGC=off", "PATH=/bin"}
	if got := componentEnv(set); !slices.Equal(got, set) {
		t.Errorf("componentEnv(%q) = %q: a GOGC of the environment is kept", set, got)
	}
}
