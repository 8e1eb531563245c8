package ib

/*
#include <stdlib.h>
*/
import "C"

// Exit ends the process with code through the C library's exit(), the way
// the infiniband-diags tools end, so that the exit handlers of the
// management stack run; Go's os.Exit skips them. Under umad2sim those
// handlers are what give the process's client slot back to ibsim (ibsim
// serves ten clients and frees a slot only when told) and remove the
// ./sys-PID tree umad2sim made; a process that ends through os.Exit leaves
// the fabric one client short. A program that opened a Source calls Exit
// instead of os.Exit, after closing it.
func Exit(code int) {
	C.exit(C.int(code))
}
