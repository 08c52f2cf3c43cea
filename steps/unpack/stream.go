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
	"golang.org/x/sys/unix"
)

const (
	chunkSize = 128 << 10 // bytes per chunk handed from a decompressing goroutine to archive.Apply
	// maxChunks bounds how far decompression may run ahead of archive.Apply:
	// 1,024 chunks are 128 MiB, shared by all of an image's layers.
	maxChunks = 1024
)

// readAhead is the memory the decompressing goroutines fill ahead of
// archive.Apply: one anonymous mapping of maxChunks chunks, outside Go's
// heap, so the garbage collector neither scans it nor lets the heap grow to
// twice its size. The kernel gives it pages only as chunks are first used,
// and chunks go back to the free list once archive.Apply has read them.
//
// Why so much: archive.Apply spends its time on small files (a dozen system
// calls each) and little on large ones, while inflating costs the same per
// byte. During a run of small files decompression gets far ahead; during a
// run of large files archive.Apply catches up, and with only a little read
// ahead it then waits for the inflater. On a 2-core machine, with 1 MiB of
// read-ahead archive.Apply spent about a sixth of an unpack waiting; the
// /usr image of BenchmarkRuntimeChain uses up to 70 MiB of it.
type readAhead struct {
	mem    []byte
	chunks int // how many chunks mem holds
	free   chan []byte
	made   int // chunks handed out so far; only the running producer touches it
}

// newReadAhead maps memory for n chunks (maxChunks if n is 0).
func newReadAhead(n int) (*readAhead, error) {
	return mapReadAhead(n, func(size int) ([]byte, error) {
		return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	})
}

// minChunks is the least read-ahead mapReadAhead settles for: 1 MiB.
const minChunks = 8

// mapReadAhead maps n chunks with mmap. Where the kernel will not give that
// much address space (strict overcommit, vm.overcommit_memory=2, or a low
// ulimit -v), it asks for half as many, down to minChunks: less read-ahead
// makes the unpack slower, not wrong.
func mapReadAhead(n int, mmap func(size int) ([]byte, error)) (*readAhead, error) {
	if n <= 0 {
		n = maxChunks
	}
	for {
		mem, err := mmap(n * chunkSize)
		if err == nil {
			return &readAhead{mem: mem, chunks: n, free: make(chan []byte, n)}, nil
		}
		if !errors.Is(err, unix.ENOMEM) || n <= minChunks {
			return nil, fmt.Errorf("mapping %d KiB for decompressed layers: %w", n*chunkSize>>10, err)
		}
		n /= 2
		if n < minChunks {
			n = minChunks
		}
	}
}

// release unmaps the memory. Every producer must have returned and nothing
// may read a chunk any more.
func (ra *readAhead) release() {
	_ = unix.Munmap(ra.mem)
}

// get returns a free chunk, a new one while not all were handed out, or
// waits for one; it returns nil if stop is closed first.
func (ra *readAhead) get(stop <-chan struct{}) []byte {
	select {
	case b := <-ra.free:
		return b
	default:
	}
	if ra.made < ra.chunks {
		off := ra.made * chunkSize
		ra.made++
		return ra.mem[off : off+chunkSize : off+chunkSize]
	}
	select {
	case b := <-ra.free:
		return b
	case <-stop:
		return nil
	}
}

// layerStream is one layer's uncompressed tar, decompressed and hashed by
// its own goroutine ahead of whoever reads it, so the sha256 of the diff_id
// is computed off the path that writes files. The goroutines of an image's
// layers run one after the other (each starts when the one before it has
// inflated its whole layer), never two at once: with archive.Apply that makes
// two busy goroutines, one per core on a 2-core machine, and a third would
// take turns with archive.Apply.
//
// Read it to io.EOF, then call finish for the diff_id; call close in every
// case.
type layerStream struct {
	compression string

	ra     *readAhead
	chunks chan []byte // filled by the producer; closed after the last one
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

// openLayer opens l's compressed blob and starts its producer goroutine,
// which starts decompressing once after is closed (nil: at once).
func openLayer(l v1.Layer, ra *readAhead, after <-chan struct{}) (*layerStream, error) {
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
		ra:          ra,
		chunks:      make(chan []byte, ra.chunks),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		blob:        rc,
		decompress:  dr,
	}
	go s.produce(dr, counted, after)
	return s, nil
}

func (s *layerStream) produce(r io.Reader, counted *countingReader, after <-chan struct{}) {
	defer close(s.done)
	if after != nil {
		select {
		case <-after:
		case <-s.stop:
			return
		}
	}
	h := sha256.New()
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		buf := s.ra.get(s.stop)
		if buf == nil {
			return
		}
		n, err := io.ReadFull(r, buf[:cap(buf)])
		if n > 0 {
			h.Write(buf[:n])
			s.bytes += int64(n)
			s.chunks <- buf[:n] // never blocks: chunks holds every chunk there is
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = nil
			}
			if n == 0 {
				s.ra.free <- buf
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
			s.ra.free <- s.curBuf
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
