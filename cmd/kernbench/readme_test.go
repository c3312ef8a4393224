package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeCommands runs every kernbench command of README.md's code
// blocks (`go run ./cmd/kernbench ARGS`, with or without a "$ " prompt) and
// checks that it exits 0; a command with a "$ " prompt must print the
// lines that follow it in the block, where "..." stands for any text (wall
// time, event counts).
func TestReadmeCommands(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmdLine := regexp.MustCompile(`^(\$ )?go run \./cmd/kernbench (.*?)\s*(#.*)?$`)
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			if in {
				blocks = append(blocks, cur)
			}
			in, cur = !in, nil
			continue
		}
		if in {
			cur = append(cur, line)
		}
	}
	ran := 0
	for _, block := range blocks {
		for i, line := range block {
			m := cmdLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			ran++
			args := strings.Fields(m[2])
			var stdout, stderr bytes.Buffer
			if code := Main(args, &stdout, &stderr); code != 0 {
				t.Errorf("README: kernbench %s exited %d:\n%s", m[2], code, stderr.String())
				continue
			}
			if m[1] == "" {
				continue
			}
			// The expected output: the block's lines after the command, up
			// to the next command.
			for _, want := range block[i+1:] {
				if cmdLine.MatchString(want) {
					break
				}
				pattern := "(?m)^" + strings.ReplaceAll(regexp.QuoteMeta(want), `\.\.\.`, ".*") + "$"
				if !regexp.MustCompile(pattern).MatchString(stdout.String()) {
					t.Errorf("README: kernbench %s does not print\n  %s\ngot:\n%s", m[2], want, stdout.String())
				}
			}
		}
	}
	if ran < 2 {
		t.Errorf("found %d kernbench commands in README.md; the test reads them wrongly", ran)
	}
}
