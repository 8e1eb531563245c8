package place

/*
#cgo CFLAGS: -std=gnu11 -Wall -Wextra -Werror -I/usr/include/scotch
#cgo LDFLAGS: -lscotch -lscotcherr -lm
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <scotch.h>

// nl_scotch_map maps a graph onto the terminals of a tree-leaf
// architecture: a tleaf of levels levels (sizes and link costs from the
// root down) restricted to the nterm terminals in terms. parttab gets, for
// each vertex, the index into terms of its terminal. Returns 0, or the
// step that failed (1..6).
static int nl_scotch_map(SCOTCH_Num levels, const SCOTCH_Num *sizes, const SCOTCH_Num *links,
		SCOTCH_Num nterm, const SCOTCH_Num *terms,
		SCOTCH_Num nvert, const SCOTCH_Num *verttab, SCOTCH_Num narcs, const SCOTCH_Num *edgetab,
		const SCOTCH_Num *edlotab, double kbal, SCOTCH_Num *parttab) {
	SCOTCH_Arch tleaf, sub;
	SCOTCH_Graph graph;
	SCOTCH_Strat strat;
	int step = 0;
	SCOTCH_randomReset();
	SCOTCH_archInit(&tleaf);
	SCOTCH_archInit(&sub);
	SCOTCH_graphInit(&graph);
	SCOTCH_stratInit(&strat);
	if (SCOTCH_archTleaf(&tleaf, levels, sizes, links) != 0) { step = 1; goto out; }
	if (SCOTCH_archSub(&sub, &tleaf, nterm, terms) != 0) { step = 2; goto out; }
	if (SCOTCH_graphBuild(&graph, 0, nvert, verttab, NULL, NULL, NULL, narcs, edgetab, edlotab) != 0) { step = 3; goto out; }
	if (SCOTCH_graphCheck(&graph) != 0) { step = 4; goto out; }
	if (SCOTCH_stratGraphMapBuild(&strat, SCOTCH_STRATQUALITY, nterm, kbal) != 0) { step = 5; goto out; }
	if (SCOTCH_graphMap(&graph, &sub, &strat, parttab) != 0) { step = 6; goto out; }
out:
	SCOTCH_stratExit(&strat);
	SCOTCH_graphExit(&graph);
	SCOTCH_archExit(&sub);
	SCOTCH_archExit(&tleaf);
	return step;
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// scotchMu serializes calls into Scotch: its random generator is global
// state, reset before each mapping so that advice is reproducible.
var scotchMu sync.Mutex

// tleaf is a tree-leaf target architecture (Scotch's "tleaf"): Sizes[i]
// children per node at level i from the root, Links[i] the cost of
// communicating between two terminals whose closest common ancestor is at
// level i. Terms lists the terminals (numbered in the full tree, leftmost
// first) that exist: a fabric's nodes rarely fill a regular tree.
type tleaf struct {
	Sizes, Links []int32
	Terms        []int32
}

// graph is an undirected graph in compressed form: the neighbours of
// vertex v are Adj[Start[v]:Start[v+1]], with arc weights Weight.
type graph struct {
	Start  []int32
	Adj    []int32
	Weight []int32
}

var scotchSteps = [...]string{1: "building the tree-leaf architecture", 2: "restricting it to the nodes' cores",
	3: "building the communication graph", 4: "checking the communication graph", 5: "building the strategy",
	6: "mapping"}

// scotchMap maps g onto the terminals of arch with Scotch, allowing the
// load imbalance kbal (0.01: 1%). It returns, per vertex, an index into
// arch.Terms.
func scotchMap(arch tleaf, g graph, kbal float64) ([]int32, error) {
	nv := len(g.Start) - 1
	if nv <= 0 || len(arch.Terms) == 0 || len(arch.Sizes) == 0 || len(arch.Sizes) != len(arch.Links) {
		return nil, fmt.Errorf("scotch: %d vertices, %d terminals, %d levels", nv, len(arch.Terms), len(arch.Sizes))
	}
	if C.sizeof_SCOTCH_Num != 4 {
		return nil, fmt.Errorf("scotch: SCOTCH_Num is %d bytes, this build expects 4", C.sizeof_SCOTCH_Num)
	}
	part := make([]int32, nv)
	// Scotch never keeps the arrays past the call; empty edge arrays still
	// need a valid pointer.
	adj, w := g.Adj, g.Weight
	if len(adj) == 0 {
		adj, w = []int32{0}, []int32{0}
	}
	scotchMu.Lock()
	step := C.nl_scotch_map(C.SCOTCH_Num(len(arch.Sizes)), num(arch.Sizes), num(arch.Links),
		C.SCOTCH_Num(len(arch.Terms)), num(arch.Terms),
		C.SCOTCH_Num(nv), num(g.Start), C.SCOTCH_Num(len(g.Adj)), num(adj), num(w),
		C.double(kbal), num(part))
	scotchMu.Unlock()
	if step != 0 {
		return nil, fmt.Errorf("scotch: %s failed (%d vertices, %d arcs, %d terminals)", scotchSteps[step], nv, len(g.Adj), len(arch.Terms))
	}
	return part, nil
}

func num(s []int32) *C.SCOTCH_Num { return (*C.SCOTCH_Num)(unsafe.Pointer(&s[0])) }
