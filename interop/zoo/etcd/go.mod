// The etcd server command at each version of the zoo: vX.Y.Z.mod (and .sum) require that version,
// and `make zoo-build` builds each with go build -modfile vX.Y.Z.mod. This file only marks the
// module root, outside the interop module.
module github.com/listwatch/listwatch/interop/zoo/etcd

go 1.26
