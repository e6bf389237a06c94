package io.dlock;

/**
 * Work run while a lock is held, given the held lock (for its fencing token, or to check
 * {@link DLock#isHeld()} between steps). See {@link DLockClient#withLock(String, java.util.Map,
 * java.time.Duration, LockedWork)}.
 */
@FunctionalInterface
public interface LockedWork<T> {
  T run(DLock lock) throws Exception;
}
