package cmdutil

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A DurationFlag is a flag.Value for a duration of at least Min.
type DurationFlag struct {
	D   *time.Duration
	Min time.Duration
}

func (f DurationFlag) String() string {
	if f.D == nil {
		return ""
	}
	return f.D.String()
}

// Set parses s, saying what a good value looks like when it is not one.
func (f DurationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, e := strconv.ParseFloat(s, 64); e == nil {
			return fmt.Errorf("a duration needs a unit, such as %ss", s)
		}
		return fmt.Errorf("want a duration such as 300ms or 5s")
	}
	if d < f.Min {
		if f.Min == 0 {
			return fmt.Errorf("a duration cannot be negative")
		}
		return fmt.Errorf("use at least %v", f.Min)
	}
	*f.D = d
	return nil
}

// An IntFlag is a flag.Value for a whole number from Min to Max.
type IntFlag struct {
	N        *int
	Min, Max int
}

func (f IntFlag) String() string {
	if f.N == nil {
		return ""
	}
	return strconv.Itoa(*f.N)
}

// Set parses s.
func (f IntFlag) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < f.Min || n > f.Max {
		return fmt.Errorf("want a whole number from %d to %d", f.Min, f.Max)
	}
	*f.N = n
	return nil
}

// A ChoiceFlag is a flag.Value that must be one of Values.
type ChoiceFlag struct {
	S      *string
	Values []string
}

func (f ChoiceFlag) String() string {
	if f.S == nil {
		return ""
	}
	return *f.S
}

// Set checks s against the choices.
func (f ChoiceFlag) Set(s string) error {
	if !slices.Contains(f.Values, s) {
		return fmt.Errorf("want one of %s", strings.Join(f.Values, ", "))
	}
	*f.S = s
	return nil
}

// A ListFlag is a flag.Value for a comma-separated list of Choices, each
// an Item ("scenario"), for messages. The list keeps the order of Choices,
// each once; Upper folds the words given to upper case first.
type ListFlag struct {
	List    *[]string
	Choices []string
	Item    string
	Upper   bool
}

func (f ListFlag) String() string {
	if f.List == nil {
		return ""
	}
	return strings.Join(*f.List, ",")
}

// Set parses s.
func (f ListFlag) Set(s string) error {
	var picked []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if f.Upper {
			name = strings.ToUpper(name)
		}
		switch {
		case name == "":
			return fmt.Errorf("empty %s; want a list such as %s from %s", f.Item, strings.Join(f.Choices[:min(2, len(f.Choices))], ","), strings.Join(f.Choices, ","))
		case !slices.Contains(f.Choices, name):
			return fmt.Errorf("unknown %s %s; choose from %s", f.Item, name, strings.Join(f.Choices, ","))
		}
		picked = append(picked, name)
	}
	*f.List = slices.DeleteFunc(slices.Clone(f.Choices), func(n string) bool { return !slices.Contains(picked, n) })
	return nil
}
