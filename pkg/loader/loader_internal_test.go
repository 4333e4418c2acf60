package loader

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{1, 10 * time.Second},
		{2, 20 * time.Second},
		{3, 40 * time.Second},
		{5, 160 * time.Second},
		{6, 5 * time.Minute},
		{60, 5 * time.Minute},
	}
	for _, tt := range tests {
		if got := backoff(tt.failures, 10*time.Second, 5*time.Minute); got != tt.want {
			t.Errorf("backoff(%d) = %s, want %s", tt.failures, got, tt.want)
		}
	}
}

func TestJobName(t *testing.T) {
	tests := []struct{ id, want string }{
		{"0123456789abcdef0123456789abcdef01234567", "installstrategy-dump-0123456789abcdef0123"},
		{"short", "installstrategy-dump-short"},
	}
	for _, tt := range tests {
		if got := jobName(tt.id); got != tt.want {
			t.Errorf("jobName(%s) = %s, want %s", tt.id, got, tt.want)
		}
	}
}
