package unpack

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/containerd/containerd/v2/pkg/archive/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
)

const (
	chunkSize   = 128 << 10 // bytes per chunk handed from the decompressing goroutine to archive.Apply
	chunksAhead = 8         // how far (in chunks) decompression may run ahead: 1 MiB per layer
)

// layerStream is one layer's uncompressed tar, decompressed and hashed by
// its own goroutine up to chunksAhead chunks ahead of whoever reads it. While
// archive.Apply writes layer N, layer N+1 is already being decompressed, and
// the sha256 of the diff_id is computed off the path that writes files.
//
// Read it to io.EOF, then call finish for the diff_id; call close in every
// case.
type layerStream struct {
	compression string

	chunks chan []byte // filled by the producer; closed after the last one
	free   chan []byte // empty chunks back to the producer
	stop   chan struct{}
	done   chan struct{} // closed when the producer has returned

	// set by the producer before it closes chunks
	err        error
	diffID     v1.Hash
	bytes      int64
	compressed int64

	cur, curBuf []byte
	blob        io.Closer // the compressed blob
	decompress  io.Closer // the decompressor (ends unpigz)
	closed      bool
}

// openLayer opens l's compressed blob, starts decompressing it and starts
// the producer goroutine.
func openLayer(l v1.Layer) (*layerStream, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("opening the layer blob: %w", err)
	}
	counted := &countingReader{r: rc}
	dr, err := decompress(counted)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("starting to decompress the layer: %w", err)
	}
	s := &layerStream{
		compression: compressionName(dr.GetCompression()),
		chunks:      make(chan []byte, chunksAhead),
		free:        make(chan []byte, chunksAhead+1),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		blob:        rc,
		decompress:  dr,
	}
	for i := 0; i < chunksAhead+1; i++ {
		s.free <- make([]byte, chunkSize)
	}
	go s.produce(dr, counted)
	return s, nil
}

func (s *layerStream) produce(r io.Reader, counted *countingReader) {
	defer close(s.done)
	h := sha256.New()
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		var buf []byte
		select {
		case buf = <-s.free:
		case <-s.stop:
			return
		}
		n, err := io.ReadFull(r, buf[:cap(buf)])
		if n > 0 {
			h.Write(buf[:n])
			s.bytes += int64(n)
			select {
			case s.chunks <- buf[:n]:
			case <-s.stop:
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = nil
			}
			s.err = err
			s.diffID = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
			s.compressed = counted.n
			close(s.chunks)
			return
		}
	}
}

// Read serves the decompressed tar from the producer's chunks.
func (s *layerStream) Read(p []byte) (int, error) {
	for len(s.cur) == 0 {
		if s.curBuf != nil {
			s.free <- s.curBuf
			s.curBuf = nil
		}
		b, ok := <-s.chunks
		if !ok {
			if s.err != nil {
				return 0, s.err
			}
			return 0, io.EOF
		}
		s.cur, s.curBuf = b, b
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

// finish reads what is left of the stream (the tar's padding after its end
// marker: the diff_id covers every byte) and returns the diff_id and sizes.
func (s *layerStream) finish() (diffID v1.Hash, bytes, compressed int64, err error) {
	if _, err := io.Copy(io.Discard, s); err != nil {
		return v1.Hash{}, 0, 0, fmt.Errorf("reading the end of the layer: %w", err)
	}
	<-s.done
	return s.diffID, s.bytes, s.compressed, nil
}

// close stops the producer and waits for it, then closes the decompressor
// (which ends unpigz). The blob is closed first: a producer waiting for
// compressed bytes that will never come gets an error instead.
func (s *layerStream) close() {
	if s.closed {
		return
	}
	s.closed = true
	close(s.stop)
	s.blob.Close()
	<-s.done
	s.decompress.Close()
}

// decompress detects the compression from the stream's first bytes, as
// containerd does, and decompresses it. Zstd and uncompressed tars go
// through containerd's compression.DecompressStream. Gzip is decompressed in
// this process with klauspost/compress, the library DecompressStream itself
// uses when unpigz is not on PATH: DecompressStream would otherwise pipe the
// layer through an unpigz process, and on a 2-core machine that cost 15% more
// time and CPU (BenchmarkUnpack) than inflating in the goroutine that already
// runs beside archive.Apply.
func decompress(r io.Reader) (compression.DecompressReadCloser, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	magic, err := br.Peek(10)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if compression.DetectCompression(magic) != compression.Gzip {
		return compression.DecompressStream(br)
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, err
	}
	return gzipStream{zr}, nil
}

type gzipStream struct{ *gzip.Reader }

func (gzipStream) GetCompression() compression.Compression { return compression.Gzip }
