package tl_test

import (
	"testing"

	"kernbench/engine/sim"
)

// Rule (docs/architecture.md, IPCQ; SendBufferHazard): a tl.send_async's
// message reads its source from the moment it is issued (step 2: the DMA is
// queued, my_head rises) until its DMA completes; the send's overhead, after
// which send returns, is not part of it. With an overhead longer than a round
// trip, rank 0's first message is delivered, answered by rank 1 and the
// answer received into the message's own source while the send_async is still
// in that message's overhead: the receive is causally after the delivery and
// no hazard (the handle used to count the message as unissued until the
// overhead had passed). The second message is not issued yet then, so a store
// into its part still is one.
func TestSendAsyncMessageIsIssuedBeforeItsOverhead(t *testing.T) {
	globals := execSource(t, "overhead.star", []byte(`
def kernel(rank, tl):
    per = tl.slot_size // 4
    if rank == 0:
        x = tl.alloc(2 * per, "f32")
        tl.store(x, tl.full(2 * per, 1.0, "f32"))
        h = tl.send_async("E", x)
        first = x.slice(0, per)
        tl.recv("W", dst = first)
        assert.eq(tl.fetch(first).tolist(), [2.0] * per)
        assert.fails(lambda: tl.store(x.slice(per, 1), tl.full(1, 3.0, "f32")), "SendBufferHazard: tl.store: rank 0 writes .* while the tl.send_async")
        tl.wait(h)
        tl.recv("W", dst = tl.alloc(per, "f32"))
    else:
        y = tl.recv("W", dst = tl.alloc(per, "f32"))
        tl.store(y, tl.fetch(y) * 2.0)
        tl.send("E", y)
        tl.recv("W", dst = tl.alloc(per, "f32"))
        tl.send("E", y)
        tl.flush()
`))
	cfg := testIPCQ()
	cfg.Overhead = 10 * sim.Microsecond
	w := newWorldCfg(t, 2, cfg)
	if err := w.run(t, fixtureFunc(t, globals, "kernel")); err != nil {
		t.Fatal(err)
	}
}
