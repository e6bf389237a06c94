"""The article's section 7 usage, verbatim, on a PyMySQL connection.

    python article_pymysql.py URL HELD_FILE GO_FILE

Connects with pymysql.connect() to the server of URL, then runs the article's
code. Its business step writes HELD_FILE and waits until GO_FILE exists, so
that a test can look at the lock while this process holds it. Exits 1 with
"获取锁失败" when the lock was not acquired within 3 s.
"""

import os
import sys
import time
import urllib.parse

import pymysql

from dlock import MysqlDistributedLock

u = urllib.parse.urlsplit(sys.argv[1])
held_file, go_file = sys.argv[2], sys.argv[3]


def business():
    with open(held_file, "w") as f:
        f.write(str(os.getpid()))
    deadline = time.monotonic() + 60
    while not os.path.exists(go_file) and time.monotonic() < deadline:
        time.sleep(0.01)


conn = pymysql.connect(host=u.hostname, port=u.port or 3306, user=urllib.parse.unquote(u.username or "root"),
                       password=urllib.parse.unquote(u.password or ""), database=u.path.lstrip("/"))

# ---- the article, section 7, verbatim (its business step calls business()) ----
# 业务函数里
lock = MysqlDistributedLock(conn, "order:1001", timeout=30)
if not lock.acquire(wait_time=3):
    raise Exception("获取锁失败")
try:
    # 业务操作
    business()
    pass
finally:
    lock.release()
