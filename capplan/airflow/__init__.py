"""What the Airflow DAGs (``airflow_dags/``) call: the scheduled jobs and the names the DAG files need at
parse time.
"""
