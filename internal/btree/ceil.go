package btree

// Ceil returns the smallest item not below key: key's own item if the tree
// holds one, else the next. A caller checking ascending keys learns from
// one Ceil that every key in [key, the item returned) is absent, without
// a descent for each (engine/condscan.go).
func (t *BTreeG[T]) Ceil(key T) (_ T, _ bool) {
	var next T
	has := false
	n := t.root
	for n != nil {
		i, found := n.items.find(key, t.cow.less)
		if found {
			return n.items[i], true
		}
		if i < len(n.items) {
			next, has = n.items[i], true // the nearest above key so far
		}
		if len(n.children) == 0 {
			break
		}
		n = n.children[i]
	}
	return next, has
}
