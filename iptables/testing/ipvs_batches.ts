/**
 * Batches the fake and the real ipvsadm must treat alike (checked against the real one in tests/vm).
 * @module
 */

/** A batch exercising every operation; tests/vm/guest checks the real ipvsadm agrees. */
export const BATCH = [
  "-A -t 10.0.0.1:80 -s rr",
  "-a -t 10.0.0.1:80 -r 10.1.0.1:8080 -m -w 1",
  "-a -t 10.0.0.1:80 -r 10.1.0.2:8080 -m -w 1",
  "-A -u 10.0.0.2:53 -s sh -p 300 -b flag-1,flag-2",
  "-a -u 10.0.0.2:53 -r 10.1.0.2:53 -m -w 1",
  "-A --sctp-service 10.0.0.3:99 -s wlc",
  "-A -t [fd00::1]:80 -s mh -b flag-1",
  "-a -t [fd00::1]:80 -r [fd00:1::5]:8080 -m -w 1",
  "-E -t 10.0.0.1:80 -s wrr -p 10800",
  "-e -t 10.0.0.1:80 -r 10.1.0.1:8080 -m -w 0",
  "-d -t 10.0.0.1:80 -r 10.1.0.2:8080",
  "-D --sctp-service 10.0.0.3:99",
];

/** What ipvsadm -S -n prints after {@linkcode BATCH} (lines sorted: the kernel's order is its hash order). */
export const BATCH_SAVED = [
  "-A -t 10.0.0.1:80 -s wrr -p 10800",
  "-A -t [fd00::1]:80 -s mh -b mh-fallback",
  "-A -u 10.0.0.2:53 -s sh -p 300 -b sh-fallback,sh-port",
  "-a -t 10.0.0.1:80 -r 10.1.0.1:8080 -m -w 0",
  "-a -t [fd00::1]:80 -r [fd00:1::5]:8080 -m -w 1",
  "-a -u 10.0.0.2:53 -r 10.1.0.2:53 -m -w 1",
];

/**
 * Lines that fail after `-A -t 10.0.0.9:80 -s rr` and `-A -t 10.0.0.10:80 -s rr`, each with the
 * message ipvsadm 1.31 prints (Linux 6.1, tests/vm).
 */
export const FAILING_LINES: ReadonlyArray<readonly [string, string]> = [
  ["-D -t 10.0.0.99:80", "No such service"],
  ["-E -t 10.0.0.99:80 -s rr", "No such service"],
  ["-d -t 10.0.0.99:80 -r 1.2.3.4:80", "Service not defined"],
  ["-a -t 10.0.0.99:80 -r 1.2.3.4:80 -m -w 1", "Service not defined"],
  ["-d -t 10.0.0.9:80 -r 1.2.3.5:80", "No such destination"],
  ["-e -t 10.0.0.9:80 -r 1.2.3.5:80 -m -w 1", "No such destination"],
  ["-A -t 10.0.0.10:80 -s bogus", "Service already exists"],
  ["-A -t 10.0.0.11:80 -s bogus", "Scheduler or persistence engine not found"],
];
