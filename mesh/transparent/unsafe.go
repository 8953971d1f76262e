package transparent

import "unsafe"

// ptr views the start of a control-message buffer as a kernel struct.
func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
