// Command etcd is the etcd server command (etcdmain) of the version its -modfile requires, built for listwatch's zoo
// (interop/zoo): the driver starts it with etcd's flags.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
