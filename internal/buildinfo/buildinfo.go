// Package buildinfo holds the version, commit and build date stamped into
// the plugin and the operator at build time (make build and make release
// set them with -ldflags "-X ..."; see the Makefile). Unstamped builds
// report the module version Go recorded, or "(devel)".
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Stamped at build time with
//
//	-X github.com/installstrategy/installstrategy/internal/buildinfo.version=v0.1.0
//	-X github.com/installstrategy/installstrategy/internal/buildinfo.commit=<sha>
//	-X github.com/installstrategy/installstrategy/internal/buildinfo.date=<RFC 3339>
var (
	version string
	commit  string
	date    string
)

// Info describes a build.
type Info struct {
	// Version is the release, e.g. v0.1.0; "(devel)" when not stamped and
	// Go recorded none.
	Version string `json:"version"`
	// Commit is the git commit it was built from; from Go's VCS stamp when
	// not stamped, else empty.
	Commit string `json:"commit,omitempty"`
	// Date is the commit's date (RFC 3339), so that a rebuild of one commit
	// gives the same binary; empty when unknown.
	Date      string `json:"date,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build's Info.
func Get() Info {
	i := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && i.Commit == "":
				i.Commit = s.Value
			case s.Key == "vcs.time" && i.Date == "":
				i.Date = s.Value
			}
		}
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	return i
}

// String is "VERSION (commit COMMIT, DATE, GOVERSION PLATFORM)".
func (i Info) String() string {
	s := i.Version + " ("
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += "commit " + c + ", "
	}
	if i.Date != "" {
		s += i.Date + ", "
	}
	return s + i.GoVersion + " " + i.Platform + ")"
}
