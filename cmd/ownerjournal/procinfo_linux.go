package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ownerjournal/ownerjournal/owner"
)

// userHZ is the unit of /proc/PID/stat's start time: USER_HZ, 100 on every
// Linux ABI (proc(5)).
const userHZ = 100

// procCommand returns the command line of the process id, read from
// /proc/PID/cmdline and believed only if id is still the same running
// process afterwards (a PID reused meanwhile gives "", false).
func procCommand(id owner.Identity) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(id.PID) + "/cmdline")
	if err != nil || len(b) == 0 || owner.Check(id).State != owner.Alive {
		return "", false
	}
	args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
	return strings.Join(args, " "), true
}

// procAge returns how long the process id has been running.
func procAge(id owner.Identity) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, false
	}
	age := time.Duration(up*float64(time.Second)) - time.Duration(id.StartTime)*time.Second/userHZ
	if age < 0 {
		return 0, false
	}
	return age, true
}
