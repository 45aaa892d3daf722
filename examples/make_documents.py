"""Writes the demo corpus's PDF and Word documents (examples/corpus/backup-manual.pdf, release-checklist.docx),
made for this project (CC0). Run from a checkout: `.venv/bin/python examples/make_documents.py`."""

from __future__ import annotations

from pathlib import Path

from ragline.dev.office_files import docx, pdf

CORPUS = Path(__file__).resolve().parent / "corpus"

BACKUP_MANUAL = [
    [("h1", "数据库备份与恢复手册"),
     ("p", "本手册说明订单库和支付库的备份策略、恢复步骤和恢复演练要求，适用于所有运行在生产环境的 PostgreSQL 实例。"),
     ("h2", "适用范围"),
     ("p", "测试环境和开发环境的数据库不在本手册范围内，由各团队自行决定是否备份。")],
    [("h2", "备份策略"),
     ("p", "全量备份每天凌晨两点执行，使用 pg_basebackup 写入对象存储，保留十四天。"),
     ("p", "增量备份通过 WAL 归档实现，每五分钟归档一次，WAL 文件保留七十二小时，因此可以恢复到过去三天内的任意时间点。"),
     ("p", "备份文件在上传前用 AES-256 加密，密钥保存在密钥管理服务中，不能与备份放在同一个存储桶里。")],
    [("h2", "恢复步骤"),
     ("p", "恢复时先从对象存储下载最近一次全量备份，再按时间顺序回放 WAL 文件，直到目标时间点。"),
     ("p", "恢复完成后必须校验行数和最近一小时的订单号是否连续，确认无误后才能切换流量。"),
     ("h2", "恢复演练"),
     ("p", "每个季度进行一次恢复演练，演练结果（实际恢复时间和数据损失）记录在运维周报中。目标恢复时间不超过一小时。")],
]

RELEASE_CHECKLIST = [
    ("h1", "Before the release"),
    ("p", "Every release of the payments service has a change ticket approved by the service owner and a rollback plan "
          "written before the deployment starts."),
    ("p", "No production releases are made after 16:00 on Fridays or during the year-end freeze (15 December to 5 January)."),
    ("h1", "During the release"),
    ("h2", "Canary"),
    ("p", "The new version first receives 5% of the traffic for 30 minutes. The canary is promoted only if its error "
          "rate stays below 0.5% and its p99 latency below 800 ms."),
    ("h2", "Rollback"),
    ("p", "If the canary fails either threshold, roll back with helm rollback to the previous revision and post the "
          "reason in the release channel."),
    ("table", "check,owner;change ticket approved,service owner;dashboards watched,on-call engineer"),
]


def main() -> None:
    (CORPUS / "backup-manual.pdf").write_bytes(pdf(BACKUP_MANUAL, title="数据库备份与恢复手册"))
    (CORPUS / "release-checklist.docx").write_bytes(docx(RELEASE_CHECKLIST, title="Release checklist"))


if __name__ == "__main__":
    main()
