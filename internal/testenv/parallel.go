package testenv

import "golang.org/x/sync/errgroup"

// Parallel runs fn(0..n-1) on at most workers goroutines, waits for all of them and
// returns the first error: how the bench and the reliability tests create and update
// many objects at once.
func Parallel(workers, n int, fn func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(max(1, workers))
	for i := range n {
		g.Go(func() error { return fn(i) })
	}
	return g.Wait()
}
