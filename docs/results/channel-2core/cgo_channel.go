// SPDX-License-Identifier: MIT
// The Go program of docs/perf.md §76: 8 goroutines (GOMAXPROCS 8) make
// blocks of MIN..MAX bytes with C.malloc, fill them, and pass them through a
// channel of 1024; every third iteration one takes a block out, checks it
// and frees it. The OS threads that run the goroutines take turns, so most
// frees are of another thread's block. STATS=1 prints malloc_stats() at the
// end (Go's exit runs no C destructor, so HAKOZUNA_STATS prints nothing).
//
//	mkdir cgo_channel && cp cgo_channel.go cgo_channel/main.go && cd cgo_channel
//	go mod init cgo_channel && go build -o cgo_channel .
//	/usr/bin/time -f "%e s, user %U s, %M KB" env LD_PRELOAD=.../libhakozuna.so ./cgo_channel 32768 70000
package main

/*
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
static void stats(void){ malloc_stats(); }
static void* mk(size_t n){ void*p=malloc(n); if(p) memset(p,0xab,n); return p; }
static int ok(void*p,size_t n){ unsigned char*c=p; for(size_t i=0;i<n;i+=64) if(c[i]!=0xab) return 0; return 1; }
*/
import "C"
import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"unsafe"
)

func main() {
	runtime.GOMAXPROCS(8)
	lo, _ := strconv.Atoi(os.Args[1])
	hi, _ := strconv.Atoi(os.Args[2])
	type blk struct {
		p unsafe.Pointer
		n C.size_t
	}
	ch := make(chan blk, 1024)
	var wg sync.WaitGroup
	bad := 0
	var mu sync.Mutex
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 200000; i++ {
				n := C.size_t(lo + (i*7919+w*131)%(hi-lo))
				p := C.mk(n)
				select {
				case ch <- blk{p, n}:
				default:
					C.free(p)
				}
				if i%3 == 0 {
					select {
					case b := <-ch:
						q, m := b.p, b.n
						if C.ok(q, m) == 0 {
							mu.Lock()
							bad++
							mu.Unlock()
						}
						C.free(q)
					default:
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(ch)
	fmt.Println("bad", bad)
	if os.Getenv("STATS") != "" {
		C.stats()
	}
}
