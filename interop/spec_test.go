package interop

import (
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The workload is generated as plain specs first and turned into clientv3 calls per side, because
// lease IDs differ between the sides: a spec names a lease by handle, and each side resolves the
// handle to the ID its server granted.

// selMode is how a key selection extends its key.
type selMode int

const (
	selKey     selMode = iota // the key alone
	selRange                  // [Key, End)
	selPrefix                 // every key with prefix Key
	selFromKey                // every key >= Key
)

// keySel selects keys as clientv3's range options do.
type keySel struct {
	Key  string
	End  string
	Mode selMode
}

func (s keySel) opts() []clientv3.OpOption {
	switch s.Mode {
	case selRange:
		return []clientv3.OpOption{clientv3.WithRange(s.End)}
	case selPrefix:
		return []clientv3.OpOption{clientv3.WithPrefix()}
	case selFromKey:
		return []clientv3.OpOption{clientv3.WithFromKey()}
	}
	return nil
}

func (s keySel) cmp(c clientv3.Cmp) clientv3.Cmp {
	switch s.Mode {
	case selRange:
		return c.WithRange(s.End)
	case selPrefix:
		return c.WithPrefix()
	case selFromKey:
		return c.WithRange("\x00")
	}
	return c
}

func (s keySel) String() string {
	switch s.Mode {
	case selRange:
		return fmt.Sprintf("[%q,%q)", s.Key, s.End)
	case selPrefix:
		return fmt.Sprintf("prefix %q", s.Key)
	case selFromKey:
		return fmt.Sprintf(">=%q", s.Key)
	}
	return strconv.Quote(s.Key)
}

// leaseRef names a lease: a workload handle (resolved per side), or a raw ID when Handle < 0.
type leaseRef struct {
	Handle int
	Raw    int64
}

var noLease = leaseRef{Handle: -1}

func (l leaseRef) String() string {
	if l.Handle >= 0 {
		return fmt.Sprintf("lease#%d", l.Handle)
	}
	return fmt.Sprintf("lease=%d", l.Raw)
}

// sortSpec is a RangeRequest sort; nil means no WithSort option.
type sortSpec struct {
	Target clientv3.SortTarget
	Order  clientv3.SortOrder
}

type getSpec struct {
	Sel          keySel
	Rev          int64
	Limit        int64
	CountOnly    bool
	KeysOnly     bool
	Serializable bool
	Sort         *sortSpec
	MinMod       int64
	MaxMod       int64
	MinCreate    int64
	MaxCreate    int64
}

// option is one option of a request that the spec may set: its clientv3 option and how String
// names it.
type option struct {
	on   bool
	name string
	opt  func() clientv3.OpOption
}

// boolOption is a boolean option.
func boolOption(on bool, name string, opt func() clientv3.OpOption) option {
	return option{on: on, name: " " + name, opt: opt}
}

// revOption is a revision or count option, set when not 0.
func revOption(name string, v int64, opt func(int64) clientv3.OpOption) option {
	return option{on: v != 0, name: fmt.Sprintf(" %s=%d", name, v), opt: func() clientv3.OpOption { return opt(v) }}
}

// withOptions appends the clientv3 options that are set.
func withOptions(opts []clientv3.OpOption, options []option) []clientv3.OpOption {
	for _, o := range options {
		if o.on {
			opts = append(opts, o.opt())
		}
	}
	return opts
}

// writeOptions writes the names of the options that are set.
func writeOptions(b *strings.Builder, options []option) {
	for _, o := range options {
		if o.on {
			b.WriteString(o.name)
		}
	}
}

func (g *getSpec) options() []option {
	sorted := option{on: g.Sort != nil}
	if g.Sort != nil {
		sorted.name = fmt.Sprintf(" sort=%d/%d", g.Sort.Target, g.Sort.Order)
		sorted.opt = func() clientv3.OpOption { return clientv3.WithSort(g.Sort.Target, g.Sort.Order) }
	}
	return []option{
		revOption("rev", g.Rev, clientv3.WithRev),
		revOption("limit", g.Limit, clientv3.WithLimit),
		revOption("minMod", g.MinMod, clientv3.WithMinModRev),
		revOption("maxMod", g.MaxMod, clientv3.WithMaxModRev),
		revOption("minCreate", g.MinCreate, clientv3.WithMinCreateRev),
		revOption("maxCreate", g.MaxCreate, clientv3.WithMaxCreateRev),
		boolOption(g.CountOnly, "countOnly", clientv3.WithCountOnly),
		boolOption(g.KeysOnly, "keysOnly", clientv3.WithKeysOnly),
		boolOption(g.Serializable, "serializable", clientv3.WithSerializable),
		sorted,
	}
}

func (g *getSpec) op() clientv3.Op {
	return clientv3.OpGet(g.Sel.Key, withOptions(g.Sel.opts(), g.options())...)
}

func (g *getSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "get %v", g.Sel)
	writeOptions(&b, g.options())
	return b.String()
}

type putSpec struct {
	Key         string
	Value       string
	Lease       leaseRef
	PrevKV      bool
	IgnoreValue bool
	IgnoreLease bool
}

func (p *putSpec) options() []option {
	return []option{
		boolOption(p.PrevKV, "prevKV", clientv3.WithPrevKV),
		boolOption(p.IgnoreValue, "ignoreValue", clientv3.WithIgnoreValue),
		boolOption(p.IgnoreLease, "ignoreLease", clientv3.WithIgnoreLease),
	}
}

func (p *putSpec) op(s *side) clientv3.Op {
	var opts []clientv3.OpOption
	if id := s.leaseID(p.Lease); id != 0 {
		opts = append(opts, clientv3.WithLease(clientv3.LeaseID(id)))
	}
	return clientv3.OpPut(p.Key, p.Value, withOptions(opts, p.options())...)
}

func (p *putSpec) String() string {
	var b strings.Builder
	v := p.Value
	if len(v) > 16 {
		v = fmt.Sprintf("<%d bytes>", len(v))
	}
	fmt.Fprintf(&b, "put %q=%q", p.Key, v)
	if p.Lease != noLease {
		fmt.Fprintf(&b, " %v", p.Lease)
	}
	writeOptions(&b, p.options())
	return b.String()
}

type delSpec struct {
	Sel    keySel
	PrevKV bool
}

func (d *delSpec) op() clientv3.Op {
	opts := d.Sel.opts()
	if d.PrevKV {
		opts = append(opts, clientv3.WithPrevKV())
	}
	return clientv3.OpDelete(d.Sel.Key, opts...)
}

func (d *delSpec) String() string {
	s := fmt.Sprintf("delete %v", d.Sel)
	if d.PrevKV {
		s += " prevKV"
	}
	return s
}

// cmpSpec is one txn compare. Target is one of "version", "create", "mod", "value", "lease".
type cmpSpec struct {
	Sel    keySel
	Target string
	Result string
	Int    int64
	Value  string
	Lease  leaseRef
}

func (c *cmpSpec) cmp(s *side) clientv3.Cmp {
	k := c.Sel.Key
	switch c.Target {
	case "version":
		return c.Sel.cmp(clientv3.Compare(clientv3.Version(k), c.Result, c.Int))
	case "create":
		return c.Sel.cmp(clientv3.Compare(clientv3.CreateRevision(k), c.Result, c.Int))
	case "mod":
		return c.Sel.cmp(clientv3.Compare(clientv3.ModRevision(k), c.Result, c.Int))
	case "value":
		return c.Sel.cmp(clientv3.Compare(clientv3.Value(k), c.Result, c.Value))
	default:
		return c.Sel.cmp(clientv3.Compare(clientv3.LeaseValue(k), c.Result, s.leaseID(c.Lease)))
	}
}

func (c *cmpSpec) String() string {
	switch c.Target {
	case "value":
		return fmt.Sprintf("value(%v)%s%q", c.Sel, c.Result, c.Value)
	case "lease":
		return fmt.Sprintf("lease(%v)%s%v", c.Sel, c.Result, c.Lease)
	}
	return fmt.Sprintf("%s(%v)%s%d", c.Target, c.Sel, c.Result, c.Int)
}

type txnSpec struct {
	Cmps []cmpSpec
	Then []opSpec
	Else []opSpec
}

func (t *txnSpec) parts(s *side) ([]clientv3.Cmp, []clientv3.Op, []clientv3.Op) {
	cmps := make([]clientv3.Cmp, len(t.Cmps))
	for i := range t.Cmps {
		cmps[i] = t.Cmps[i].cmp(s)
	}
	ops := func(specs []opSpec) []clientv3.Op {
		out := make([]clientv3.Op, len(specs))
		for i := range specs {
			out[i] = specs[i].op(s)
		}
		return out
	}
	return cmps, ops(t.Then), ops(t.Else)
}

func (t *txnSpec) String() string {
	var b strings.Builder
	b.WriteString("txn{if[")
	for i := range t.Cmps {
		if i > 0 {
			b.WriteString(" && ")
		}
		b.WriteString(t.Cmps[i].String())
	}
	list := func(name string, ops []opSpec) {
		fmt.Fprintf(&b, "] %s[", name)
		if len(ops) > 8 {
			fmt.Fprintf(&b, "%d ops, first %v", len(ops), &ops[0])
			return
		}
		for i := range ops {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(ops[i].String())
		}
	}
	list("then", t.Then)
	list("else", t.Else)
	b.WriteString("]}")
	return b.String()
}

// opSpec is one KV operation: exactly one field is set.
type opSpec struct {
	Get *getSpec
	Put *putSpec
	Del *delSpec
	Txn *txnSpec
}

func (o *opSpec) op(s *side) clientv3.Op {
	switch {
	case o.Get != nil:
		return o.Get.op()
	case o.Put != nil:
		return o.Put.op(s)
	case o.Del != nil:
		return o.Del.op()
	}
	cmps, thenOps, elseOps := o.Txn.parts(s)
	return clientv3.OpTxn(cmps, thenOps, elseOps)
}

func (o *opSpec) String() string {
	switch {
	case o.Get != nil:
		return o.Get.String()
	case o.Put != nil:
		return o.Put.String()
	case o.Del != nil:
		return o.Del.String()
	}
	return o.Txn.String()
}

// watchSpec is one clientv3 watch.
type watchSpec struct {
	Sel           keySel
	Rev           int64
	PrevKV        bool
	NoPut         bool
	NoDelete      bool
	CreatedNotify bool
	Fragment      bool
	// Stream names the gRPC watch stream (clientv3 shares one stream per outgoing metadata).
	Stream string
}

func (w *watchSpec) options() []option {
	return []option{
		boolOption(w.PrevKV, "prevKV", clientv3.WithPrevKV),
		boolOption(w.NoPut, "noPut", clientv3.WithFilterPut),
		boolOption(w.NoDelete, "noDelete", clientv3.WithFilterDelete),
		boolOption(w.CreatedNotify, "createdNotify", clientv3.WithCreatedNotify),
		boolOption(w.Fragment, "fragment", clientv3.WithFragment),
	}
}

func (w *watchSpec) opts() []clientv3.OpOption {
	opts := w.Sel.opts()
	if w.Rev != 0 {
		opts = append(opts, clientv3.WithRev(w.Rev))
	}
	return withOptions(opts, w.options())
}

func (w *watchSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "watch %v rev=%d stream=%s", w.Sel, w.Rev, w.Stream)
	writeOptions(&b, w.options())
	return b.String()
}
