package scheduler

// nodeHeap is a binary max-heap of node indexes by the score a group run
// gives them (see groupRun.better): the node to choose is on top. It is
// written out rather than built on container/heap to keep the hot path
// free of interface calls. pos maps a node index to its position, so that
// a node whose score changed is fixed in O(log n); it is shared by all the
// heaps of one group run, since a node is in at most one of them, and is
// -1 for a node in none.
type nodeHeap struct {
	part  int // the spread partition of the nodes in this heap
	nodes []int32
	run   *groupRun
}

func (h *nodeHeap) init() {
	for i, n := range h.nodes {
		h.run.pos[n] = int32(i)
	}
	for i := len(h.nodes)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *nodeHeap) push(n int32) {
	i := len(h.nodes)
	h.run.pos[n] = int32(i)
	h.nodes = append(h.nodes, n)
	h.up(i)
}

func (h *nodeHeap) pop() int32 {
	last := len(h.nodes) - 1
	h.swap(0, last)
	n := h.nodes[last]
	h.nodes = h.nodes[:last]
	h.run.pos[n] = -1
	h.down(0)
	return n
}

// fix restores the order after the node at i changed its score.
func (h *nodeHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *nodeHeap) swap(i, j int) {
	s := h.nodes
	s[i], s[j] = s[j], s[i]
	h.run.pos[s[i]] = int32(i)
	h.run.pos[s[j]] = int32(j)
}

func (h *nodeHeap) less(i, j int) bool { return h.run.better(h.nodes[i], h.nodes[j]) }

func (h *nodeHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down moves the node at i towards the leaves and reports whether it moved.
func (h *nodeHeap) down(i int) bool {
	start := i
	n := len(h.nodes)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}
