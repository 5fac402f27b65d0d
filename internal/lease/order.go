package lease

// An Order, embedded in a lock (through an unexported alias, so that the
// field stays unexported), gives OrderOf the key the lock takes on its
// server. Two locks of one name may take different keys (a Redis Mutex
// made WithBareKey and one in dlock's layout): a MultiLock orders such
// locks by it, so that every MultiLock takes them in one order.
type Order struct{ key string }

// NewOrder returns the Order of a lock that takes key.
func NewOrder(key string) Order { return Order{key: key} }

func (o Order) orderKey() string { return o.key }

type ordered interface{ orderKey() string }

// OrderOf returns the key of the Order embedded in l, or "" if l has none.
func OrderOf(l any) string {
	if o, ok := l.(ordered); ok {
		return o.orderKey()
	}
	return ""
}
