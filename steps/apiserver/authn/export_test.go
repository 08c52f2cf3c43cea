package authn

import "time"

// SetClock makes a's clock now, for tests of what it remembers.
func (a *X509) SetClock(now func() time.Time) { a.now = now }
