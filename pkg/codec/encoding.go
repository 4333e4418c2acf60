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

// maxDeflateRatio is the most deflate expands its input: 258 bytes from
// every 2 bits of a block, about 1032 to 1.
const maxDeflateRatio = 1032

// gunzip decompresses a gzip stream, refusing more than limit bytes of
// output. It never holds a buffer of more than limit+1 bytes: the buffer
// starts at the size the gzip trailer records (trusted no further than the
// limit and what deflate can make of the input, so a trailer that lies
// costs no more than the input could really expand to) and grows by
// doubling, up to limit+1, only as decoded bytes arrive.
func gunzip(compressed []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("not gzip data: stream is empty or truncated in its header")
		}
		return nil, fmt.Errorf("not gzip data: %w", err)
	}
	defer zr.Close()
	// The trailer records the size modulo 2^32: a hint, never trusted.
	hint := int64(0)
	if len(compressed) >= 4 {
		hint = int64(binary.LittleEndian.Uint32(compressed[len(compressed)-4:]))
	}
	// One byte more than the text, so its end is a read of nothing rather
	// than a growth.
	buf := make([]byte, 0, min(hint, limit, int64(len(compressed))*maxDeflateRatio)+1)
	for {
		if len(buf) == cap(buf) {
			// A doubling that would reach the limit goes to limit+1 at
			// once: the last buffer is the only one of that size.
			size := max(2*int64(cap(buf)), bytes.MinRead)
			if size >= limit {
				size = limit + 1
			}
			grown := make([]byte, len(buf), size)
			copy(grown, buf)
			buf = grown
		}
		n, err := zr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, &limitError{limit: limit}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			switch {
			case errors.Is(err, io.ErrUnexpectedEOF):
				return nil, fmt.Errorf("truncated gzip stream after %d decoded bytes", len(buf))
			case errors.Is(err, gzip.ErrChecksum):
				return nil, errors.New("gzip checksum mismatch: the data is corrupt")
			default:
				return nil, fmt.Errorf("corrupt gzip stream after %d decoded bytes: %w", len(buf), err)
			}
		}
	}
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
