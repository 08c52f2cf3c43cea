// Command true exits 0 at once: the trivial container of the runc benchmark.
package main

func main() {}
