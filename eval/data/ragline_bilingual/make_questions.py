"""Writes questions.jsonl from the table below (kept as code so the set can be reviewed and regenerated).

Each fact of a document is asked once in Chinese and once in English; one of the two is formal, the other colloquial,
alternating from fact to fact. `answers` are strings of the document itself: an offline answer quotes the document in
its own language. The absent questions ask about what none of the documents says."""

import json
from pathlib import Path

ZH_DOCS = {"kafka-consumer-lag.md", "mysql-slow-query.md", "release-process.md", "oncall-escalation.md",
           "gateway-rate-limit.md", "backup-restore.md"}

FACTS = [
    # (document, Chinese question, English question, answers)
    ("kafka-consumer-lag.md", "order-sync 消费者组积压超过多少条会触发 P2 告警？", "How many messages of lag trigger the P2 alert for order-sync?", ["50000"]),
    ("kafka-consumer-lag.md", "Kafka 积压一直降不下来多久会升成 P1？", "How long must the consumer lag last before it becomes a P1?", ["10 分钟"]),
    ("kafka-consumer-lag.md", "查看消费者组每个分区积压用什么命令？", "what command shows the lag per partition for a consumer group", ["kafka-consumer-groups.sh"]),
    ("kafka-consumer-lag.md", "order-sync 最多能扩到几个实例啊？", "What is the maximum number of order-sync consumer instances?", ["24"]),
    ("kafka-consumer-lag.md", "消息处理慢时 max.poll.records 应该调成多少？", "When messages are slow to process, what should max.poll.records be lowered to?", ["100"]),
    ("kafka-consumer-lag.md", "max.poll.interval.ms 默认是多少毫秒？", "what's the default max.poll.interval.ms", ["300000"]),
    ("mysql-slow-query.md", "生产库慢查询阈值 long_query_time 设置的是多少？", "slow query threshold on prod db?", ["1 秒"]),
    ("mysql-slow-query.md", "慢日志放哪儿了？", "Where is the MySQL slow query log stored?", ["/var/log/mysql/slow.log"]),
    ("mysql-slow-query.md", "汇总慢查询日志使用什么工具？", "which tool do we use to summarise the slow log", ["pt-query-digest"]),
    ("mysql-slow-query.md", "EXPLAIN 里 type 是啥说明全表扫描了？", "In EXPLAIN output, which type value means a full table scan?", ["ALL"]),
    ("mysql-slow-query.md", "orders 表的分页查询应该改成什么方式？", "how should paging on the orders table be done instead", ["游标分页"]),
    ("mysql-slow-query.md", "加索引用啥工具做在线变更？", "Which tool must be used for online schema changes when adding an index?", ["gh-ost"]),
    ("release-process.md", "常规发布窗口是几点到几点？", "when are we allowed to deploy on a normal day", ["10:00 到 16:00"]),
    ("release-process.md", "新版本灰度第一步放多少流量？", "What share of traffic does a new version get in the first canary step?", ["5%"]),
    ("release-process.md", "灰度由哪个平台自动推进？", "what tool drives the canary steps automatically", ["Argo Rollouts"]),
    ("release-process.md", "错误率到多少会自动回滚？", "At what error rate does the release platform roll back automatically?", ["1%"]),
    ("release-process.md", "人工回滚使用什么命令？", "how do I roll back by hand", ["kubectl argo rollouts undo"]),
    ("release-process.md", "发布总结得多久之内补上？", "Within how many hours must the release summary be written?", ["24 小时"]),
    ("oncall-escalation.md", "基础设施组值班每周什么时候交接？", "when does the on-call shift hand over", ["周一上午 10 点"]),
    ("oncall-escalation.md", "P1 告警要几分钟内响应？", "What is the response time for a P1 alert?", ["5 分钟"]),
    ("oncall-escalation.md", "值班排班表维护在哪个系统？", "where's the on-call schedule kept", ["PagerDuty"]),
    ("oncall-escalation.md", "主值班一直不确认 P1 会怎样？", "What happens when the primary on-call does not acknowledge a P1 within 15 minutes?", ["副值班"]),
    ("oncall-escalation.md", "P1 故障复盘要在几个工作日内完成？", "how many working days do we have for a P1 postmortem", ["3 个工作日"]),
    ("oncall-escalation.md", "复盘报告用啥格式？", "Which format do postmortem reports follow?", ["blameless"]),
    ("gateway-rate-limit.md", "网关默认每个客户端 IP 每秒允许多少请求？", "default rate limit per client ip on the gateway?", ["20 个请求"]),
    ("gateway-rate-limit.md", "被限流了会返回啥状态码？", "Which HTTP status does the gateway return when a request is rate limited?", ["429"]),
    ("gateway-rate-limit.md", "企业版租户的限额在哪个配置项里设置？", "where do I change an enterprise tenant's rate limit", ["gateway.tenant-limits"]),
    ("gateway-rate-limit.md", "租户限额最高能调到多少？", "What is the highest rate limit an enterprise tenant can get?", ["500"]),
    ("gateway-rate-limit.md", "网关白名单维护在哪个文件？", "which file holds the gateway allowlist", ["allowlist.conf"]),
    ("gateway-rate-limit.md", "改了限额要重启网关吗？", "How long does a changed tenant limit take to apply?", ["60 秒", "不需要重启"]),
    ("backup-restore.md", "MySQL 全量备份每天几点做？", "when does the nightly full backup of MySQL run", ["凌晨 2 点"]),
    ("backup-restore.md", "binlog 多久归档一次？", "How often is the MySQL binlog archived?", ["每 15 分钟"]),
    ("backup-restore.md", "备份存在哪个桶里？", "which bucket are the backups in", ["backup-prod"]),
    ("backup-restore.md", "全量备份保留多少天？", "How long are full backups kept?", ["30 天"]),
    ("backup-restore.md", "恢复演练多久搞一次？", "How often is a restore drill held?", ["每季度"]),
    ("backup-restore.md", "数据库的目标恢复时间 RTO 是多少？", "what's the RTO for the database", ["4 小时"]),
    ("elasticsearch-operations.md", "搜索集群有几个专用主节点？", "How many dedicated master nodes does the search cluster have?", ["3 dedicated master nodes"]),
    ("elasticsearch-operations.md", "ES 集群变红了是什么意思？", "what does a red cluster health mean", ["primary shard"]),
    ("elasticsearch-operations.md", "查看分片为什么没有分配用什么接口？", "How do I find out why a shard is not allocated?", ["_cluster/allocation/explain"]),
    ("elasticsearch-operations.md", "磁盘用到多少 ES 就不往这个节点分配分片了？", "At which disk usage does Elasticsearch stop allocating shards to a node?", ["85%"]),
    ("elasticsearch-operations.md", "磁盘满到哪个程度索引会变成只读？", "when do indices go read-only because of disk", ["95%"]),
    ("elasticsearch-operations.md", "大规模 reindex 时 requests_per_second 设多少？", "what requests_per_second do we use for big reindex jobs", ["500"]),
    ("ci-pipeline.md", "合并请求的流水线有哪几个阶段？", "what stages does a merge request pipeline run", ["lint, unit tests, integration tests"]),
    ("ci-pipeline.md", "流水线跑太久会怎样，时限是多少？", "What is the time limit for a pipeline?", ["20 minutes"]),
    ("ci-pipeline.md", "依赖缓存保留多久？", "how long are dependency caches kept", ["14 days"]),
    ("ci-pipeline.md", "不稳定的测试连续几周会被隔离？", "After how many weeks of flakiness is a test quarantined?", ["three weeks"]),
    ("ci-pipeline.md", "CI 构建机是几核几 G 内存？", "How many CPU cores and how much memory do the CI runners have?", ["8 CPU cores"]),
    ("ci-pipeline.md", "最多同时跑多少个任务？", "how many jobs can run at the same time", ["40 jobs"]),
    ("tls-certificates.md", "公网证书由谁签发？", "who issues our public certificates", ["Let's Encrypt"]),
    ("tls-certificates.md", "cert-manager 提前多少天续期证书？", "How many days before expiry does cert-manager renew a certificate?", ["30 days"]),
    ("tls-certificates.md", "内部服务证书有效期多长？", "how long are internal service certs valid", ["72 hours"]),
    ("tls-certificates.md", "证书快过期的告警阈值是多少天？", "When does the certificate expiry alert fire?", ["14 days"]),
    ("tls-certificates.md", "自动续期挂了怎么手动续？", "How do I renew a certificate by hand when automatic renewal fails?", ["cmctl renew"]),
    ("tls-certificates.md", "证书自动续期失败一般是什么原因？", "what usually breaks automatic renewal", ["API token has expired"]),
    ("feature-flags.md", "SDK 多久刷新一次开关的本地副本？", "how often does the flag sdk refresh", ["every 30 seconds"]),
    ("feature-flags.md", "按百分比放量时同一个用户结果会变吗？", "Does a percentage rollout give the same user the same answer every time?", ["same user always gets the same answer"]),
    ("feature-flags.md", "开关服务挂了 SDK 怎么办？", "What does the SDK do when the flag service is unreachable?", ["last values it fetched"]),
    ("feature-flags.md", "从来没拉取过的开关默认值必须是什么？", "what must the default value of a flag in code be", ["always be off"]),
    ("feature-flags.md", "全量打开多少天的开关必须从代码里删掉？", "After how many days fully on must a flag be removed from the code?", ["60 days"]),
    ("feature-flags.md", "过期开关清单每周几出？", "when is the list of stale flags shown", ["every Monday"]),
    ("incident-2024-07-dns.md", "2024 年 7 月内部 DNS 故障持续了多久？", "How long did the internal DNS outage in July 2024 last?", ["52 minutes"]),
    ("incident-2024-07-dns.md", "DNS 挂的时候下单成功率掉到多少？", "what did the checkout success rate drop to during the dns outage", ["61%"]),
    ("incident-2024-07-dns.md", "DNS 故障的根本原因是什么？", "What caused the July 2024 DNS outage?", ["cache size to 100 entries"]),
    ("incident-2024-07-dns.md", "CoreDNS 从几个副本扩到了几个？", "how many coredns replicas after the fix", ["from 4 to 8 replicas"]),
    ("incident-2024-07-dns.md", "回滚配置变更是在几点？", "At what time was the configuration change reverted?", ["10:47"]),
    ("incident-2024-07-dns.md", "DNS 故障后在每个节点上部署了什么？", "what got rolled out to every node after the dns incident", ["NodeLocal DNSCache"]),
    ("logging-pipeline.md", "容器日志用什么采集？", "What collects the container logs?", ["Fluent Bit"]),
    ("logging-pipeline.md", "应用日志在 Loki 里存几天？", "how long do app logs stay in loki", ["14 days"]),
    ("logging-pipeline.md", "审计日志保留多久？", "How long are audit logs kept?", ["400 days"]),
    ("logging-pipeline.md", "Loki 单个流每秒写多少就会被拒绝？", "how much can one stream write per second before loki rejects it", ["10 MB per second"]),
    ("logging-pipeline.md", "被拒绝的日志行计数在哪个指标里？", "Which metric counts the log lines Loki rejected?", ["loki_discarded_samples_total"]),
    ("logging-pipeline.md", "跨所有 namespace 查日志会怎么样？", "what happens to a query across every namespace over a long time range", ["cancelled after 60 seconds"]),
]

ABSENT = [
    ("zh", "Kafka 集群一共有几个 broker？"), ("zh", "MySQL 主库的 innodb_buffer_pool_size 是多少？"),
    ("zh", "发布平台的管理员是谁？"), ("zh", "值班补贴每天多少钱？"), ("zh", "网关用的是哪个版本的 Nginx？"),
    ("zh", "Redis 集群的分片数量是多少？"), ("zh", "本季度技术部的OKR是什么？"), ("zh", "Elasticsearch 的堆内存配置成多大？"),
    ("zh", "日志系统每个月花多少钱？"), ("zh", "CI 流水线用的是 Jenkins 还是 GitLab？"),
    ("en", "How many brokers does the Kafka cluster have?"), ("en", "What is the innodb_buffer_pool_size of the primary database?"),
    ("en", "who is the owner of the release platform"), ("en", "How much is the on-call allowance per day?"),
    ("en", "Which Nginx version does the gateway run?"), ("en", "What heap size is configured for Elasticsearch?"),
    ("en", "how much does the logging system cost per month"), ("en", "Which company provides our CDN?"),
    ("en", "What is the SLA of the feature flag service?"), ("en", "How many engineers are on the infrastructure team?"),
]


def main() -> None:
    here = Path(__file__).parent
    rows = []
    for n, (doc, zh, en, answers) in enumerate(FACTS):
        doc_lang = "zh" if doc in ZH_DOCS else "en"
        zh_style, en_style = ("formal", "colloquial") if n % 2 == 0 else ("colloquial", "formal")
        for lang, question, style in (("zh", zh, zh_style), ("en", en, en_style)):
            rows.append({"id": f"q{len(rows):03d}", "question": question, "lang": lang, "doc_lang": doc_lang, "style": style,
                         "answers": answers, "documents": [doc], "answerable": True})
    for lang, question in ABSENT:
        rows.append({"id": f"q{len(rows):03d}", "question": question, "lang": lang, "doc_lang": "", "style": "formal",
                     "answers": [], "documents": [], "answerable": False})
    with open(here / "questions.jsonl", "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} questions")


if __name__ == "__main__":
    main()
