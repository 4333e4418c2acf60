// Package confine is how the plugin writes files: every file goes into a
// folder opened as an os.Root, under a name of one component, so that no
// name (one derived from a cluster object, a strategy, a user's flag) can
// reach outside the folder: not with "..", "/", an absolute path, nor a
// symbolic link planted in the folder. Names derived from data are built
// by escaping each part (Name), never by cleaning; Names refuses to give
// two owners the same file. Writes are atomic: a temporary file in the same
// folder, synced, renamed over the target, so a reader sees the old content
// or the new, never half of either.
package confine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxName is the longest file name Name returns, in bytes: what common
// file systems (ext4, xfs, APFS, NTFS) hold in one path component.
const MaxName = 255

// Name builds a file name of one component from parts of data: each part
// escaped (Escape), the parts joined with sep, then suffix. A name longer
// than MaxName keeps its beginning and ends with "~" and a hash of the
// whole name, then suffix, so that long names stay distinct. sep and suffix
// are the caller's constants (such as "_" and ".yaml"); they must not hold
// a path separator.
func Name(sep, suffix string, parts ...string) string {
	escaped := make([]string, len(parts))
	for i, p := range parts {
		escaped[i] = Escape(p)
	}
	name := strings.Join(escaped, sep)
	if len(name)+len(suffix) <= MaxName {
		return name + suffix
	}
	sum := sha256.Sum256([]byte(name))
	tail := "~" + hex.EncodeToString(sum[:8])
	return name[:MaxName-len(tail)-len(suffix)] + tail + suffix
}

// Escape returns s with every byte other than an ASCII letter, digit, "-",
// "_" or "." (and a "." that begins s) replaced by "%" and its two hex
// digits, as in a URL. The result is "" only for "", is never "." or
// "..", holds no path separator, no control character and nothing outside
// ASCII (no lookalike of another name), and no two strings escape alike.
func Escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// ErrCollision is returned by Names.Add when two owners would share a file.
var ErrCollision = errors.New("two objects map to one file name")

// Names hands out file names to owners (objects, by the caller's
// description) and refuses a name already given to another owner, or one
// that differs from it only in case (one file on a case-insensitive file
// system, such as macOS's or Windows'). The zero value is ready to use.
type Names struct {
	owners map[string]string // folded name → owner
}

// Add records that owner writes the file name.
func (n *Names) Add(name, owner string) error {
	if n.owners == nil {
		n.owners = map[string]string{}
	}
	key := strings.ToLower(name)
	if other, taken := n.owners[key]; taken {
		return fmt.Errorf("%s and %s: file name %s: %w", other, owner, name, ErrCollision)
	}
	n.owners[key] = owner
	return nil
}

// Dir is a folder the plugin writes into; nothing it does reaches outside
// the folder.
type Dir struct {
	path string
	root *os.Root
	temp bool
}

// Open opens an existing folder.
func Open(path string) (*Dir, error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, fmt.Errorf("open folder %s: %w", path, err)
	}
	return &Dir{path: path, root: root}, nil
}

// Create creates the folder (and its parents) when missing, and opens it.
func Create(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create folder %s: %w", path, err)
	}
	return Open(path)
}

// Temp creates a new temporary folder whose name begins with prefix; Close
// removes it with everything in it.
func Temp(prefix string) (*Dir, error) {
	path, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, fmt.Errorf("create temporary folder: %w", err)
	}
	d, err := Open(path)
	if err != nil {
		_ = os.RemoveAll(path)
		return nil, err
	}
	d.temp = true
	return d, nil
}

// Path returns the folder's path as given.
func (d *Dir) Path() string { return d.path }

// Close releases the folder (and removes it, made by Temp).
func (d *Dir) Close() error {
	err := d.root.Close()
	if d.temp {
		err = errors.Join(err, os.RemoveAll(d.path))
	}
	return err
}

// checkName refuses a name that is not exactly one component of a path.
func checkName(name string) error {
	switch {
	case name == "", name == ".", name == "..":
		return fmt.Errorf("file name %q: not a file name", name)
	case strings.ContainsAny(name, "/\\\x00"), !filepath.IsLocal(name), filepath.Base(name) != name:
		return fmt.Errorf("file name %q: holds a path separator or is not local", name)
	case len(name) > MaxName:
		return fmt.Errorf("file name %.40q…: longer than %d bytes", name, MaxName)
	}
	return nil
}

// WriteFile writes data to the file name in the folder atomically, with
// the permissions perm, replacing the file (or a symbolic link, never its
// target) of that name.
func (d *Dir) WriteFile(name string, data []byte, perm os.FileMode) (err error) {
	if err := checkName(name); err != nil {
		return fmt.Errorf("write in %s: %w", d.path, err)
	}
	fail := func(err error) error { return fmt.Errorf("write %s: %w", filepath.Join(d.path, name), err) }
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = d.root.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fail(err)
	}
	if err = f.Chmod(perm); err != nil {
		return fail(err)
	}
	if err = f.Sync(); err != nil {
		return fail(err)
	}
	if err = f.Close(); err != nil {
		return fail(err)
	}
	if err = d.root.Rename(tmp, name); err != nil {
		return fail(err)
	}
	return nil
}

// ReadFile reads the file name of the folder.
func (d *Dir) ReadFile(name string) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("read in %s: %w", d.path, err)
	}
	return d.root.ReadFile(name)
}

// Remove removes the file name of the folder (a symbolic link itself, never
// its target); a missing file is no error.
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("remove in %s: %w", d.path, err)
	}
	if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

// Entries lists the folder, sorted by name.
func (d *Dir) Entries() ([]fs.DirEntry, error) {
	return fs.ReadDir(d.root.FS(), ".")
}

// WriteFile writes data atomically to the file path names (a person's
// choice, such as --output-file), confined to the folder that holds it.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := checkName(base); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.WriteFile(base, data, perm)
}
