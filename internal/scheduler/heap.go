package scheduler

// nodeHeap is a binary min-heap of nodes by (load, ID). It is written out
// rather than built on container/heap to keep the hot path free of
// interface calls. A node can be in several heaps at once (one per node
// set, see nodeSet), so positions are not kept in the node but in pos,
// indexed by the node's idx and shared by the heaps of one set: a node is
// in at most one class, so in at most one heap of a set. pos is -1 for a
// node that is not in the set's heaps; that makes fix O(log n).
type nodeHeap struct {
	nodes []*nodeState
	pos   []int32
}

func (h *nodeHeap) init() {
	for i, n := range h.nodes {
		h.pos[n.idx] = int32(i)
	}
	for i := len(h.nodes)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *nodeHeap) push(n *nodeState) {
	i := len(h.nodes)
	h.pos[n.idx] = int32(i)
	h.nodes = append(h.nodes, n)
	h.up(i)
}

func (h *nodeHeap) pop() *nodeState {
	last := len(h.nodes) - 1
	h.swap(0, last)
	n := h.nodes[last]
	h.nodes[last] = nil
	h.nodes = h.nodes[:last]
	h.pos[n.idx] = -1
	h.down(0)
	return n
}

// fix restores the order after the node at i changed its load.
func (h *nodeHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *nodeHeap) swap(i, j int) {
	s := h.nodes
	s[i], s[j] = s[j], s[i]
	h.pos[s[i].idx] = int32(i)
	h.pos[s[j].idx] = int32(j)
}

func (h *nodeHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.nodes[i].before(h.nodes[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down moves the node at i towards the leaves and reports whether it moved.
func (h *nodeHeap) down(i int) bool {
	start := i
	s := h.nodes
	for {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		m := l
		if r := l + 1; r < len(s) && s[r].before(s[l]) {
			m = r
		}
		if !s[m].before(s[i]) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}
