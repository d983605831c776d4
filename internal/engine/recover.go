package engine

// Recover rebuilds the live engine state through seq by a strict replay of
// the log in dir, for a member that restarts over an existing log. Its
// outputs are not returned: they were published (or dropped) before.
func Recover(dir string, through int64) (*Engine, error) {
	r, err := ReplayAll(dir, through)
	if err != nil {
		return nil, err
	}
	return r.eng, nil
}
