// Package control reaches the nodes of a test: it runs shell commands on
// them, copies files to and from them, and starts, signals and stops their
// daemons, the same way whether a node is this machine (Local) or another
// one reached over SSH (SSH). It is the harness's hands on machines it did
// not start, as Jepsen's control namespace is Jepsen's.
//
// A Remote does one thing: Run a shell command line and report its output
// and exit status. Everything else (Upload, Fetch, the daemon functions,
// the verified faults) is built from Run, so that a new kind of remote
// (docker exec, a serial console) only has to run commands.
//
// Commands are sh command lines; Line quotes an argument vector into one.
// A node with Sudo runs each line as "sudo -n -- sh -c LINE": -n because a
// test has no one to type a password, so a sudo that wants one fails at
// once with its own message instead of hanging.
//
// Over SSH a line runs through the login user's shell ("bash -c 'sh -c
// LINE'"), which may read its startup files: Debian's bash reads ~/.bashrc
// when sshd starts it, so a slow or noisy .bashrc slows or pollutes every
// command. Keep it quiet for non-interactive shells.
//
// Nodes files (ParseNodes) list the machines of a test, one a line.
package control
