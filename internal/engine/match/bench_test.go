package match

import "testing"

func BenchmarkContains(b *testing.B) {
	msg := "Hi, I don’t want Dr. Smith. Could you tell me more about the next available appointment?"
	ps := []string{"topic 3", "question about 3", "zebraxxx", "don't want 3"}
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range ps {
			Contains(msg, p)
		}
	}
}
