package codec

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
)

// decodeBase64 decodes standard, padded base64, tolerating white space
// anywhere. Errors carry the offset in the original string.
func decodeBase64(s string) ([]byte, error) {
	dst := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	// The usual case, one line or lines broken by CR/LF (which the
	// decoder skips), needs no compacting.
	if n, err := base64.StdEncoding.Decode(dst, []byte(s)); err == nil {
		return dst[:n], nil
	}
	// Spaces or tabs, or corrupt: compact, and map an error's offset back
	// to the original text.
	src, origin := compact(s)
	n, err := base64.StdEncoding.Decode(dst, src)
	if err != nil {
		var corrupt base64.CorruptInputError
		if errors.As(err, &corrupt) {
			off := int64(corrupt)
			if origin != nil && int(off) < len(origin) {
				off = int64(origin[off])
			} else if origin != nil {
				off = int64(len(s))
			}
			return nil, &offsetError{offset: off, err: errors.New("invalid base64")}
		}
		return nil, err
	}
	return dst[:n], nil
}

// gunzip decompresses a gzip stream, refusing more than limit bytes of
// output.
func gunzip(compressed []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("not gzip data: stream is empty or truncated in its header")
		}
		return nil, fmt.Errorf("not gzip data: %w", err)
	}
	defer zr.Close()
	// The gzip trailer records the size modulo 2^32: a hint for the buffer,
	// never trusted beyond the limit.
	hint := int64(0)
	if len(compressed) >= 4 {
		hint = int64(binary.LittleEndian.Uint32(compressed[len(compressed)-4:]))
	}
	// bytes.Buffer.ReadFrom wants MinRead bytes free before each read:
	// without them a text of exactly the hinted size doubles the buffer.
	hint = min(hint, limit) + bytes.MinRead
	buf := bytes.NewBuffer(make([]byte, 0, hint))
	n, err := buf.ReadFrom(io.LimitReader(zr, limit+1))
	if err != nil {
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("truncated gzip stream after %d decoded bytes", n)
		case errors.Is(err, gzip.ErrChecksum):
			return nil, errors.New("gzip checksum mismatch: the data is corrupt")
		default:
			return nil, fmt.Errorf("corrupt gzip stream after %d decoded bytes: %w", n, err)
		}
	}
	if n > limit {
		return nil, &limitError{limit: limit}
	}
	return buf.Bytes(), nil
}

// gzipBase64 compresses text and encodes it as one line of padded base64.
// The KubeVirt form uses the standard library at its default level, which
// reproduces KubeVirt's own bytes exactly; the native form uses the faster
// klauspost implementation.
func gzipBase64(text []byte, f Format) (string, error) {
	var buf bytes.Buffer
	buf.Grow(len(text)/6 + 64)
	w := newGzipWriter(&buf, f)
	if _, err := w.Write(text); err != nil {
		return "", fmt.Errorf("gzip: %w", err)
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("gzip: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// newGzipWriter is the compressor of form f (see gzipBase64).
func newGzipWriter(w io.Writer, f Format) io.WriteCloser {
	if f == FormatKubeVirt {
		return stdgzip.NewWriter(w)
	}
	return gzip.NewWriter(w)
}

// Gzip compresses a manifests text as the native form does (klauspost's
// gzip at the default level, no name and no time in the header), so the
// same text always gives the same bytes. OCI artifacts keep their text so.
func Gzip(text []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(text)/6 + 64)
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(text); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// Gunzip decompresses a gzip stream, refusing more than limit bytes of
// output (0 means DefaultMaxDecodedBytes).
func Gunzip(compressed []byte, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxDecodedBytes
	}
	return gunzip(compressed, limit)
}
