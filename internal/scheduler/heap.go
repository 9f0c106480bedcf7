package scheduler

// nodeHeap is a binary min-heap of nodes by (load, ID). It is written out
// rather than built on container/heap to keep the hot path free of
// interface calls; each node records its position so that fix is O(log n).
type nodeHeap []*nodeState

func (h nodeHeap) init() {
	for i := range h {
		h[i].pos = i
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *nodeHeap) push(n *nodeState) {
	n.pos = len(*h)
	*h = append(*h, n)
	h.up(n.pos)
}

func (h *nodeHeap) pop() *nodeState {
	old := *h
	last := len(old) - 1
	old.swap(0, last)
	n := old[last]
	old[last] = nil
	*h = old[:last]
	h.down(0)
	return n
}

// fix restores the order after the node at i changed its load.
func (h nodeHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h nodeHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos = i
	h[j].pos = j
}

func (h nodeHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down moves the node at i towards the leaves and reports whether it moved.
func (h nodeHeap) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}
