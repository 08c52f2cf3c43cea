package statedir

import "path/filepath"

// lastFile is the record of what the last by-hand stage made.
const lastFile = "last.json"

// LastMade is the record of what the last by-hand stage made (podlab
// pull, unpack, spec, runc create|run; see steps/last): the image pulled
// last, the bundle unpacked last, the bundle whose spec was written last,
// the container created last. Each stage reads it when its argument is
// left out.
func (l Layout) LastMade() string { return filepath.Join(l.Dir, lastFile) }
