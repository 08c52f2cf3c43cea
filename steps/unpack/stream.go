package unpack

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/containerd/containerd/v2/pkg/archive/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
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
// which starts decompressing once after is closed (nil: at once) and hashes
// the tar with alg, the algorithm of the layer's diff_id (sha256 or sha512,
// v1.Hasher's).
func openLayer(l v1.Layer, alg string, ra *readAhead, after <-chan struct{}) (*layerStream, error) {
	h, err := diffIDHasher(alg)
	if err != nil {
		return nil, err
	}
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
	go s.produce(dr, counted, after, alg, h)
	return s, nil
}

// diffIDHasher is the hash a diff_id of algorithm alg is computed with:
// the OCI image spec registers sha256 and sha512, as go-containerregistry's
// v1.Hasher knows them.
func diffIDHasher(alg string) (hash.Hash, error) {
	h, err := v1.Hasher(alg)
	if err != nil {
		return nil, fmt.Errorf("%w: a diff_id of algorithm %q: the OCI image spec's are sha256 and sha512", ErrDigestAlgorithm, alg)
	}
	return h, nil
}

func (s *layerStream) produce(r io.Reader, counted *countingReader, after <-chan struct{}, alg string, h hash.Hash) {
	defer close(s.done)
	if after != nil {
		select {
		case <-after:
		case <-s.stop:
			return
		}
	}
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
			s.diffID = v1.Hash{Algorithm: alg, Hex: hex.EncodeToString(h.Sum(nil))}
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
//
// Zstd is decompressed here too, with a bounded window (see MaxZstdWindow):
// DecompressStream's decoder accepts the format's largest windows.
func decompress(r io.Reader) (compression.DecompressReadCloser, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	magic, err := br.Peek(18) // a zstd frame header is at most 18 bytes
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	switch compression.DetectCompression(magic) {
	case compression.Gzip:
	case compression.Zstd:
		return newZstdStream(br, magic)
	default:
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

// MaxZstdWindow bounds the window a zstd layer may ask its decoder for: 8
// MiB, the largest window the zstd format (RFC 8878, 3.1.1.1.2) recommends
// every decoder support. The window is memory the decoder must hold (the
// decompressed bytes a match may reach back to), and a frame names it in
// its header: a layer of a few KiB that asks for the format's 512 MiB cost
// 637 MB at unpack with containerd's decoder, which accepts it. zstd's
// levels 1 to 19 (and Go's klauspost encoder, which BuildKit uses) stay
// within 8 MiB; only --ultra levels and --long mode go beyond it.
const MaxZstdWindow = 8 << 20

// zstdStream is a zstd decoder bounded to MaxZstdWindow, one block decoded
// at a time: the producer goroutine is already the decompressor's own.
type zstdStream struct {
	dec      *zstd.Decoder // not embedded: its WriteTo would bypass Read's translation
	declared uint64        // the first frame's window, when its header says
}

func newZstdStream(r io.Reader, header []byte) (*zstdStream, error) {
	z := &zstdStream{}
	z.declared, _ = zstdFrameWindow(header)
	if z.declared > MaxZstdWindow {
		return nil, z.tooLarge() // no decoder at all
	}
	d, err := zstd.NewReader(r,
		zstd.WithDecoderMaxWindow(MaxZstdWindow),
		zstd.WithDecoderMaxMemory(MaxZstdWindow), // for a stream, also a bound on the window
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
	)
	if err != nil {
		return nil, z.translate(err)
	}
	z.dec = d
	return z, nil
}

func (z *zstdStream) Read(p []byte) (int, error) {
	n, err := z.dec.Read(p)
	return n, z.translate(err)
}

// translate turns the decoder's window errors into ErrZstdWindowTooLarge.
func (z *zstdStream) translate(err error) error {
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		z.declared = 0 // a later frame's: its size is not known here
		return z.tooLarge()
	}
	return err
}

func (z *zstdStream) tooLarge() error {
	asked := "more"
	if z.declared > 0 {
		asked = fmt.Sprintf("%d MiB (%d bytes)", z.declared>>20, z.declared)
	}
	return fmt.Errorf("%w: the layer's zstd frame asks for a window of %s, over podlab's limit of %d MiB "+
		"(the zstd format's recommended maximum; levels 1-19 stay within it, --ultra and --long may not): "+
		"refused before allocating it; recompress the layer without --ultra or --long",
		ErrZstdWindowTooLarge, asked, MaxZstdWindow>>20)
}

func (z *zstdStream) Close() error {
	z.dec.Close()
	return nil
}

func (*zstdStream) GetCompression() compression.Compression { return compression.Zstd }

// zstdFrameWindow reads the window size a zstd frame header declares
// (RFC 8878, 3.1.1.1): from the Window_Descriptor, or for a single-segment
// frame the Frame_Content_Size. ok is false when h is not a whole frame
// header (a skippable frame first, or too short).
func zstdFrameWindow(h []byte) (size uint64, ok bool) {
	if len(h) < 6 || h[0] != 0x28 || h[1] != 0xb5 || h[2] != 0x2f || h[3] != 0xfd {
		return 0, false
	}
	fhd := h[4]
	if fhd&0x20 == 0 { // not single segment: a Window_Descriptor follows
		wd := h[5]
		base := uint64(1) << (10 + uint(wd>>3))
		return base + base/8*uint64(wd&7), true
	}
	didSize := [4]int{0, 1, 2, 4}[fhd&3]
	fcsSize := [4]int{1, 2, 4, 8}[fhd>>6]
	off := 5 + didSize
	if len(h) < off+fcsSize {
		return 0, false
	}
	var fcs uint64
	for i := fcsSize - 1; i >= 0; i-- {
		fcs = fcs<<8 | uint64(h[off+i])
	}
	if fcsSize == 2 {
		fcs += 256
	}
	return fcs, true
}
